//! `spec.dcgmExporter` and `spec.dcgm`: GPU telemetry.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::alerting::{GrafanaDashboardsConfig, PrometheusRuleConfig};
use super::common::{ContainerSpec, ImageSpec};
use super::monitoring::ServiceMonitorConfig;

/// The DCGM exporter.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::cel::enabled_by_default)]
pub struct DcgmExporterSpec {
    /// Deploy the DCGM exporter and its `nvidia-dcgm-exporter` Service (port 9400,
    /// `gpu-metrics`). Defaults to true.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Image of the DCGM exporter.
    #[serde(flatten)]
    pub image: ImageSpec,
    /// Options of the exporter container. Env `DCGM_REMOTE_HOSTENGINE_INFO` points it at a host
    /// engine; by default it uses `nvidia-dcgm:5555` when `dcgm` is enabled, else its own
    /// embedded engine.
    #[serde(flatten)]
    pub container: ContainerSpec,
    /// Run the exporter pods in the node's network namespace. Defaults to false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_network: Option<bool>,
    /// Run the exporter pods in the node's process namespace, so metrics can name the host
    /// processes using a GPU. Defaults to false.
    #[serde(rename = "hostPID", skip_serializing_if = "Option::is_none")]
    pub host_pid: Option<bool>,
    /// Annotations added to the exporter pods.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
    /// Which metrics the exporter collects.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<DcgmExporterConfig>,
    /// The Prometheus Operator ServiceMonitor for the exporter's Service.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_monitor: Option<ServiceMonitorConfig>,
    /// Alert rules for the GPUs and the GPU stack, as a Prometheus Operator PrometheusRule.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prometheus_rule: Option<PrometheusRuleConfig>,
    /// Grafana dashboards (GPU fleet, cost, operator) as ConfigMaps for Grafana's sidecar.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grafana_dashboards: Option<GrafanaDashboardsConfig>,
    /// The exporter's Service.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service: Option<DcgmExporterServiceConfig>,
    /// HPC job mapping: label GPU metrics with the batch job using the GPU, read from files in a
    /// host directory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hpc_job_mapping: Option<HpcJobMappingConfig>,
    /// Add the labels of the pod using a GPU to its metrics (gives the exporter read access to
    /// pods). Defaults to false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enable_pod_labels: Option<bool>,
    /// Add the UID of the pod using a GPU to its metrics (gives the exporter read access to
    /// pods). Defaults to false.
    #[serde(rename = "enablePodUID", skip_serializing_if = "Option::is_none")]
    pub enable_pod_uid: Option<bool>,
    /// With `enablePodLabels`, only pod labels matching one of these regular expressions are
    /// added; empty adds all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_label_allowlist_regex: Option<Vec<String>>,
}

/// Metrics configuration of the DCGM exporter.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DcgmExporterConfig {
    /// Name of a ConfigMap in the operator's namespace whose key `dcgm-metrics.csv` lists the
    /// metrics to collect; unset uses the exporter's default list.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// The DCGM exporter's Service.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DcgmExporterServiceConfig {
    /// Service type: `ClusterIP` (the default), `NodePort` or `LoadBalancer`.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    /// Which endpoints serve traffic from inside the cluster: `Cluster` (the default) or
    /// `Local` (only the exporter on the caller's node).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub internal_traffic_policy: Option<String>,
}

/// HPC job mapping of the DCGM exporter.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::cel::hpc_job_mapping)]
pub struct HpcJobMappingConfig {
    /// Turn job mapping on. Defaults to false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Host directory with one file per GPU naming its job. Defaults to
    /// `/var/lib/dcgm-exporter/job-mapping`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub directory: Option<String>,
}

/// The standalone DCGM host engine.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::cel::enabled_by_default)]
pub struct DcgmSpec {
    /// Deploy `nv-hostengine` as its own DaemonSet and `nvidia-dcgm` Service (port 5555, node
    /// local). Defaults to true when unset; NVIDIA's chart sets false, so the exporter uses its
    /// embedded engine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Image of DCGM.
    #[serde(flatten)]
    pub image: ImageSpec,
    /// Options of the DCGM container.
    #[serde(flatten)]
    pub container: ContainerSpec,
    /// Run the DCGM pods in the node's network namespace. Defaults to false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_network: Option<bool>,
    /// Deprecated and ignored: DCGM is reached through the `nvidia-dcgm` Service on port 5555.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_port: Option<i32>,
}
