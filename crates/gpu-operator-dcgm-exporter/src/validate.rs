//! Checks the ClusterPolicy for the DCGM exporter and resolves its images. Pure.

use gpu_operator_api::{ClusterPolicySpec, spec::DcgmExporterSpec};
use gpu_operator_core::{
    Error,
    build::{runtime_class::GpuAccess, shared::Shared},
    contract::Cluster,
};

/// Env of the exporter that turns on pod-label enrichment.
pub const POD_LABELS_ENV: &str = "DCGM_EXPORTER_KUBERNETES_ENABLE_POD_LABELS";
/// Env of the exporter that turns on the pod-UID label.
pub const POD_UID_ENV: &str = "DCGM_EXPORTER_KUBERNETES_ENABLE_POD_UID";
/// Env naming a `namespace:name` ConfigMap of metrics the exporter reads through the API.
pub const CONFIGMAP_DATA_ENV: &str = "DCGM_EXPORTER_CONFIGMAP_DATA";

/// What rendering the DCGM exporter needs.
#[derive(Clone, Debug)]
pub struct Input {
    /// The exporter image.
    pub image: String,
    /// The validator image, which runs the `toolkit-validation` barrier.
    pub validator_image: String,
    /// How the pods reach the GPUs (RuntimeClass or NRI annotation).
    pub gpu_access: GpuAccess,
    /// The operator namespace (role-binding subjects, ServiceMonitor namespace selector).
    pub namespace: String,
    /// `spec.dcgmExporter`.
    pub exporter: DcgmExporterSpec,
    /// Whether the standalone host engine (`nvidia-dcgm`) runs: `dcgm.enabled` unset or true.
    pub remote_engine: bool,
    /// Whether the device plugin is deployed (`devicePlugin.enabled` unset or true), which the
    /// shipped alerts depend on.
    pub device_plugin_enabled: bool,
    /// The settings every operand pod shares.
    pub shared: Shared,
}

impl Input {
    /// What rendering needs from `spec`, with the images, GPU access and namespace resolved.
    pub fn new(
        spec: &ClusterPolicySpec,
        image: String,
        validator_image: String,
        gpu_access: GpuAccess,
        namespace: String,
    ) -> Self {
        Self {
            image,
            validator_image,
            gpu_access,
            namespace,
            exporter: spec.dcgm_exporter.clone(),
            remote_engine: spec.dcgm.enabled != Some(false),
            device_plugin_enabled: spec.device_plugin_enabled(),
            shared: Shared::of(spec),
        }
    }

    /// Whether metrics carry pod labels or UIDs, so the exporter reads pods (NVIDIA's rule: the
    /// `enablePodLabels`/`enablePodUID` switches or the same env set to true).
    pub fn reads_pods(&self) -> bool {
        let exporter = &self.exporter;
        exporter.enable_pod_labels == Some(true)
            || exporter.enable_pod_uid == Some(true)
            || user_env(exporter, POD_LABELS_ENV).is_some_and(|v| v.eq_ignore_ascii_case("true"))
            || user_env(exporter, POD_UID_ENV).is_some_and(|v| v.eq_ignore_ascii_case("true"))
    }

    /// Whether the exporter talks to the API server: to read pods, or a metrics ConfigMap named
    /// by `DCGM_EXPORTER_CONFIGMAP_DATA` (`none` and empty read nothing).
    pub fn uses_api(&self) -> bool {
        self.reads_pods()
            || user_env(&self.exporter, CONFIGMAP_DATA_ENV)
                .is_some_and(|v| !v.is_empty() && v != "none")
    }

    /// The settings of the shipped alerts and dashboards.
    pub fn observability(&self) -> crate::observability::Settings {
        crate::observability::Settings::of(&self.exporter, self.device_plugin_enabled)
    }

    /// Whether the shipped alerts or dashboards are on.
    pub fn observability_enabled(&self) -> bool {
        let exporter = &self.exporter;
        exporter.prometheus_rule.as_ref().and_then(|r| r.enabled) == Some(true)
            || exporter.grafana_dashboards.as_ref().and_then(|d| d.enabled) == Some(true)
    }
}

/// The value of the user's env variable `name` of the exporter.
pub fn user_env<'a>(exporter: &'a DcgmExporterSpec, name: &str) -> Option<&'a str> {
    exporter
        .container
        .env()
        .iter()
        .rev()
        .find(|e| e.name == name)
        .map(|e| e.value.as_deref().unwrap_or_default())
}

/// `Ok(None)` when `dcgmExporter.enabled` is false (it defaults to true).
pub fn validate(spec: &ClusterPolicySpec, cluster: &Cluster<'_>) -> Result<Option<Input>, Error> {
    let exporter = &spec.dcgm_exporter;
    if exporter.enabled == Some(false) {
        return Ok(None);
    }
    let image = cluster.image("dcgmExporter", &exporter.image, "DCGM_EXPORTER_IMAGE")?;
    let validator_image = cluster.validator_image(spec)?;
    Ok(Some(Input::new(
        spec,
        image,
        validator_image,
        GpuAccess::of(spec, cluster.facts),
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
