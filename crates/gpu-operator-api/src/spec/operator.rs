//! `spec.operator` and `spec.daemonsets`: settings of the operator itself, and the ones shared by
//! every operand DaemonSet.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Affinity, PodSecurityContext, Toleration};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::ImageSpec;
use super::monitoring::ServiceMonitorConfig;

/// Settings of the operator itself.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::cel::operator)]
pub struct OperatorSpec {
    /// Deprecated and ignored: the container runtime (`docker`, `crio` or `containerd`) is
    /// detected from the nodes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_runtime: Option<String>,
    /// Name of the RuntimeClass the operator creates for the NVIDIA container runtime and sets
    /// on operand pods. Defaults to `nvidia`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "nvidia"), length(max = 253))]
    pub runtime_class: Option<String>,
    /// Deprecated and ignored: an init container image used by old operator versions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub init_container: Option<InitContainerSpec>,
    /// Labels added to the objects the operator creates.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    /// Annotations added to the objects the operator creates.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
    /// Metrics of the operator itself (port 8080).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics: Option<OperatorMetricsSpec>,
    /// OpenShift only: build the driver with the Driver Toolkit image of the cluster's RHCOS
    /// version. Unset means on when OpenShift is detected.
    #[serde(
        rename = "use_ocp_driver_toolkit",
        skip_serializing_if = "Option::is_none"
    )]
    pub use_ocp_driver_toolkit: Option<bool>,
    /// Accepted for compatibility with NVIDIA's Helm chart, which may render it; has no effect.
    /// (NVIDIA's CRD silently drops it; we keep it so nothing is lost.)
    #[serde(rename = "defaultGPUMode", skip_serializing_if = "Option::is_none")]
    pub default_gpu_mode: Option<String>,
}

/// Deprecated init container image of old operator versions; ignored.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InitContainerSpec {
    /// Image of the init container.
    #[serde(flatten)]
    pub image: ImageSpec,
}

/// Metrics of the operator.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperatorMetricsSpec {
    /// The Prometheus Operator ServiceMonitor for the operator's metrics Service, created when
    /// the ServiceMonitor CRD exists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_monitor: Option<ServiceMonitorConfig>,
}

/// Settings shared by all operand DaemonSets.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DaemonsetsSpec {
    /// Labels added to every operand DaemonSet and its pods. The keys `app` and
    /// `app.kubernetes.io/part-of` are not applied to pods, because DaemonSet selectors use them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    /// Annotations added to every operand DaemonSet and its pods.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
    /// Tolerations of the operand pods. When not empty they replace the default, which tolerates
    /// the `nvidia.com/gpu` taint (`NoSchedule`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<Toleration>>,
    /// PriorityClass of the operand pods, such as `system-node-critical` (the default of the
    /// operand manifests).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
    /// How operand DaemonSets replace their pods: `RollingUpdate` (the default) or `OnDelete`.
    /// The driver DaemonSet always uses `OnDelete`; its upgrades follow `driver.upgradePolicy`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "RollingUpdate"))]
    pub update_strategy: Option<UpdateStrategy>,
    /// Rolling-update settings, used with `updateStrategy: RollingUpdate`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rolling_update: Option<RollingUpdateSpec>,
    /// Pod-level security context of the operand pods.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_security_context: Option<PodSecurityContext>,
    /// Ours, not in NVIDIA's API (asked for in NVIDIA/gpu-operator#2626): node labels every
    /// operand pod also requires, added to each operand's own selector (such as
    /// `nvidia.com/gpu.deploy.device-plugin=true`), for example `node-pool: gpu` to keep the
    /// operands on one pool. An operand's own keys win over the same keys here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,
    /// Ours, not in NVIDIA's API (asked for in NVIDIA/gpu-operator#2626): scheduling affinity of
    /// every operand pod, for example a required node affinity on `topology.kubernetes.io/zone`.
    /// It adds to the operand's node selector; it cannot widen it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
}

/// Update strategy of the operand DaemonSets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum UpdateStrategy {
    /// Replace pods node by node, at most `rollingUpdate.maxUnavailable` at a time.
    #[default]
    RollingUpdate,
    /// Replace a pod only when it is deleted.
    OnDelete,
}

/// Rolling-update settings of the operand DaemonSets.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::cel::rolling_update)]
pub struct RollingUpdateSpec {
    /// How many nodes may have their operand pod unavailable during an update: a number such as
    /// `"1"` or a percentage such as `"10%"`. Never applied to the driver.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub max_unavailable: Option<String>,
}
