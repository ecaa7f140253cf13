//! Checks the ClusterPolicy for the DCGM exporter and resolves its images. Pure.

use std::collections::BTreeMap;

use gpu_operator_api::{
    ClusterPolicySpec,
    spec::{
        DcgmExporterServiceConfig, GrafanaDashboardsConfig, HpcJobMappingConfig,
        ServiceMonitorConfig,
    },
};
use gpu_operator_core::{
    Error,
    build::{component::Component, runtime_class::GpuAccess, shared::Shared},
    contract::Cluster,
};

use crate::{Form, observability::Settings};

/// Env of the exporter that turns on pod-label enrichment.
pub const POD_LABELS_ENV: &str = "DCGM_EXPORTER_KUBERNETES_ENABLE_POD_LABELS";
/// Env of the exporter that turns on the pod-UID label.
pub const POD_UID_ENV: &str = "DCGM_EXPORTER_KUBERNETES_ENABLE_POD_UID";
/// Env naming a `namespace:name` ConfigMap of metrics the exporter reads through the API.
pub const CONFIGMAP_DATA_ENV: &str = "DCGM_EXPORTER_CONFIGMAP_DATA";

/// The remote host engine env variable.
pub const REMOTE_ENGINE_ENV: &str = "DCGM_REMOTE_HOSTENGINE_INFO";
/// Default HPC job-mapping directory on the host.
pub const JOB_MAPPING_DIR: &str = "/var/lib/dcgm-exporter/job-mapping";

/// What rendering the DCGM exporter needs.
#[derive(Clone, Debug)]
pub struct Input {
    /// The exporter image.
    pub image: String,
    /// Whose exporter: the ClusterPolicy's or the GPUCluster's, and what that changes.
    pub form: Form,
    /// The operator namespace (role-binding subjects, ServiceMonitor namespace selector).
    pub namespace: String,
    /// `spec.dcgmExporter`'s container settings. The pods run in the host's network namespace
    /// with `hostNetwork: true`, and also when the user points the exporter at an engine on the
    /// host (`DCGM_REMOTE_HOSTENGINE_INFO=localhost…`) while `nvidia-dcgm` does not run.
    pub component: Component,
    /// Whether the pods run in the host's process namespace (`hostPID: true`).
    pub host_pid: bool,
    /// `dcgmExporter.annotations`, added to the pods; empty when unset.
    pub pod_annotations: BTreeMap<String, String>,
    /// The user's metrics ConfigMap (`dcgmExporter.config.name`), if any.
    pub metrics_config: Option<String>,
    /// What the metrics say of the pod using a GPU.
    pub enrichment: Enrichment,
    /// The host directory of HPC job mapping when `hpcJobMapping.enabled` is true (its
    /// `directory`, else NVIDIA's default).
    pub job_mapping_dir: Option<String>,
    /// `dcgmExporter.service`, its defaults when unset.
    pub service: DcgmExporterServiceConfig,
    /// `dcgmExporter.serviceMonitor` when it is enabled.
    pub service_monitor: Option<ServiceMonitorConfig>,
    /// The additional labels of the shipped alerts' PrometheusRule when
    /// `prometheusRule.enabled` is true (empty when none are set).
    pub prometheus_rule: Option<BTreeMap<String, String>>,
    /// `dcgmExporter.grafanaDashboards` when it is enabled.
    pub dashboards: Option<GrafanaDashboardsConfig>,
    /// Whether the standalone host engine of the same owner (`nvidia-dcgm`, `nvidia-dcgm-dra`)
    /// runs: `dcgm.enabled` unset or true.
    pub remote_engine: bool,
    /// What the exporter reads from the API server.
    pub api_access: ApiAccess,
    /// The settings of the shipped alerts and dashboards.
    pub observability: Settings,
    /// The settings every operand pod shares.
    pub shared: Shared,
}

/// The pod switches of `spec.dcgmExporter`: what the metrics say of the pod using a GPU.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Enrichment {
    /// Whether metrics carry the pod's labels (`enablePodLabels: true`).
    pub labels: bool,
    /// Whether metrics carry the pod's UID (`enablePodUID: true`).
    pub uid: bool,
    /// `podLabelAllowlistRegex`, empty when unset.
    pub label_allowlist: Vec<String>,
}

/// What the exporter reads from the API server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApiAccess {
    /// Nothing: its ServiceAccount token is not mounted.
    None,
    /// A metrics ConfigMap named by `DCGM_EXPORTER_CONFIGMAP_DATA` (`none` and empty read
    /// nothing).
    ConfigMap,
    /// Pods, since metrics carry pod labels or UIDs (NVIDIA's rule: the
    /// `enablePodLabels`/`enablePodUID` switches or the same env set to true), and any ConfigMap.
    Pods,
}

impl Input {
    /// What rendering needs from `spec`, with the image, the form and the namespace resolved.
    pub fn new(spec: &ClusterPolicySpec, image: String, form: Form, namespace: String) -> Self {
        let exporter = &spec.dcgm_exporter;
        let remote_engine = spec.dcgm.enabled != Some(false);
        let mut component = Component::of(&exporter.image, &exporter.container, None);
        // An engine the user runs on the host (`localhost:…`) is only reachable from the host's
        // network namespace.
        let host_engine = !remote_engine
            && component
                .user_env(REMOTE_ENGINE_ENV)
                .is_some_and(|v| v.starts_with("localhost"));
        component.host_network = host_engine || exporter.host_network == Some(true);
        let env_true = |name: &str| {
            component
                .user_env(name)
                .is_some_and(|v| v.eq_ignore_ascii_case("true"))
        };
        let pod_labels = exporter.enable_pod_labels == Some(true);
        let pod_uid = exporter.enable_pod_uid == Some(true);
        let reads_pods = pod_labels || pod_uid || env_true(POD_LABELS_ENV) || env_true(POD_UID_ENV);
        let reads_config_map = component
            .user_env(CONFIGMAP_DATA_ENV)
            .is_some_and(|v| !v.is_empty() && v != "none");
        // The GPUCluster's exporter always reads pods and ResourceSlices (NVIDIA's).
        let reads_pods = reads_pods || form.is_dra();
        let api_access = match (reads_pods, reads_config_map) {
            (true, _) => ApiAccess::Pods,
            (false, true) => ApiAccess::ConfigMap,
            (false, false) => ApiAccess::None,
        };
        let enabled = |on: Option<bool>| on == Some(true);
        Self {
            image,
            form,
            namespace,
            host_pid: exporter.host_pid == Some(true),
            pod_annotations: exporter.annotations.clone().unwrap_or_default(),
            metrics_config: exporter
                .config
                .as_ref()
                .and_then(|c| c.name.clone())
                .filter(|n| !n.is_empty()),
            enrichment: Enrichment {
                labels: pod_labels,
                uid: pod_uid,
                label_allowlist: exporter
                    .pod_label_allowlist_regex
                    .clone()
                    .unwrap_or_default(),
            },
            job_mapping_dir: job_mapping_dir(exporter.hpc_job_mapping.as_ref()),
            service: exporter.service.clone().unwrap_or_default(),
            service_monitor: exporter
                .service_monitor
                .clone()
                .filter(|m| enabled(m.enabled)),
            prometheus_rule: exporter
                .prometheus_rule
                .as_ref()
                .filter(|r| enabled(r.enabled))
                .map(|r| r.additional_labels.clone().unwrap_or_default()),
            dashboards: exporter
                .grafana_dashboards
                .clone()
                .filter(|d| enabled(d.enabled)),
            remote_engine,
            api_access,
            observability: Settings::of(exporter, spec.device_plugin_enabled()),
            component,
            shared: Shared::of(spec),
        }
    }

    /// Whether the exporter reads pods.
    pub fn reads_pods(&self) -> bool {
        self.api_access == ApiAccess::Pods
    }

    /// Whether the exporter talks to the API server at all.
    pub fn uses_api(&self) -> bool {
        self.api_access != ApiAccess::None
    }

    /// Whether the shipped alerts or dashboards are on.
    pub fn observability_enabled(&self) -> bool {
        self.prometheus_rule.is_some() || self.dashboards.is_some()
    }
}

/// The job-mapping directory when HPC job mapping is on: its `directory`, else NVIDIA's default.
fn job_mapping_dir(mapping: Option<&HpcJobMappingConfig>) -> Option<String> {
    let mapping = mapping?;
    (mapping.enabled == Some(true)).then(|| {
        mapping
            .directory
            .clone()
            .filter(|d| !d.is_empty())
            .unwrap_or_else(|| JOB_MAPPING_DIR.to_owned())
    })
}

/// `Ok(None)` when `dcgmExporter.enabled` is false (it defaults to true).
pub fn validate(spec: &ClusterPolicySpec, cluster: &Cluster<'_>) -> Result<Option<Input>, Error> {
    let exporter = &spec.dcgm_exporter;
    if exporter.enabled == Some(false) {
        return Ok(None);
    }
    let image = cluster.image("dcgmExporter", &exporter.image, "DCGM_EXPORTER_IMAGE")?;
    let form = Form::ClusterPolicy {
        validator_image: cluster.validator_image(spec)?,
        gpu_access: GpuAccess::of(spec, cluster.facts),
    };
    Ok(Some(Input::new(
        spec,
        image,
        form,
        cluster.namespace.to_owned(),
    )))
}

#[cfg(test)]
mod tests {
    use gpu_operator_api::spec::EnvVar;
    use gpu_operator_core::cache::facts::ClusterFacts;

    use super::*;

    fn input(spec: &ClusterPolicySpec) -> Option<Input> {
        let facts = ClusterFacts::default();
        let cluster = Cluster {
            namespace: "gpu-operator",
            facts: &facts,
            image_env: &|name: &str| Some(format!("x/{name}:1")),
            config_maps: &|_| None,
            policy: None,
            server: gpu_operator_core::cache::server_facts::ServerFacts::unknown(),
        };
        validate(spec, &cluster).unwrap()
    }

    #[test]
    fn disabled_renders_nothing() {
        let mut spec = ClusterPolicySpec::default();
        spec.dcgm_exporter.enabled = Some(false);
        assert!(input(&spec).is_none());
    }

    #[test]
    fn pods_are_read_only_with_enrichment_by_switch_or_env() {
        let mut spec = ClusterPolicySpec::default();
        assert!(!input(&spec).unwrap().reads_pods());
        spec.dcgm_exporter.enable_pod_uid = Some(true);
        assert!(input(&spec).unwrap().reads_pods());
        spec.dcgm_exporter.enable_pod_uid = None;
        spec.dcgm_exporter.container.env = Some(vec![EnvVar::new(POD_LABELS_ENV, "TRUE")]);
        assert!(input(&spec).unwrap().reads_pods());
        spec.dcgm_exporter.container.env = Some(vec![EnvVar::new(CONFIGMAP_DATA_ENV, "none")]);
        let plain = input(&spec).unwrap();
        assert!(!plain.reads_pods() && !plain.uses_api());
        spec.dcgm_exporter.container.env = Some(vec![EnvVar::new(CONFIGMAP_DATA_ENV, "ns:cm")]);
        assert!(input(&spec).unwrap().uses_api());
    }
}
