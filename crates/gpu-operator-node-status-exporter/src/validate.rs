//! Checks the ClusterPolicy for the node status exporter and resolves its image (NVIDIA ships it
//! in the validator image, so `VALIDATOR_IMAGE` is the fallback). Pure.

use gpu_operator_api::ClusterPolicySpec;
use gpu_operator_core::{
    Error,
    build::{component::Component, image, shared::Shared},
    contract::Cluster,
};

/// What rendering the node status exporter needs.
#[derive(Clone, Debug)]
pub struct Input {
    /// The exporter image.
    pub image: String,
    /// The operator namespace (role-binding subjects, ServiceMonitor namespace selector).
    pub namespace: String,
    /// Whether the ServiceMonitor CRD is installed: NVIDIA creates the ServiceMonitor whenever
    /// it can, without a switch.
    pub service_monitor: bool,
    /// `spec.nodeStatusExporter`'s container settings.
    pub component: Component,
    /// Whether the device plugin is deployed (`devicePlugin.enabled` unset or true).
    pub device_plugin_enabled: bool,
    /// The settings every operand pod shares.
    pub shared: Shared,
}

impl Input {
    /// What rendering needs from `spec`, with the image, namespace and ServiceMonitor CRD
    /// resolved.
    pub fn new(
        spec: &ClusterPolicySpec,
        image: String,
        namespace: String,
        service_monitor: bool,
    ) -> Self {
        Self {
            image,
            namespace,
            service_monitor,
            component: Component::of(
                &spec.node_status_exporter.image,
                &spec.node_status_exporter.container,
                spec.node_status_exporter.host_network,
            ),
            device_plugin_enabled: spec.device_plugin_enabled(),
            shared: Shared::of(spec),
        }
    }
}

/// `Ok(None)` unless `nodeStatusExporter.enabled` is true (it defaults to false).
pub fn validate(spec: &ClusterPolicySpec, cluster: &Cluster<'_>) -> Result<Option<Input>, Error> {
    let section = &spec.node_status_exporter;
    if section.enabled != Some(true) {
        return Ok(None);
    }
    let env = "VALIDATOR_IMAGE";
    let image = image::resolve(
        "nodeStatusExporter",
        &section.image,
        env,
        (cluster.image_env)(env).as_deref(),
    )?;
    Ok(Some(Input::new(
        spec,
        image,
        cluster.namespace.to_owned(),
        cluster.facts.service_monitor_crd,
    )))
}

#[cfg(test)]
mod tests {
    use gpu_operator_core::cache::facts::ClusterFacts;

    use super::*;

    #[test]
    fn off_unless_enabled() {
        let facts = ClusterFacts::default();
        let cluster = Cluster {
            namespace: "gpu-operator",
            facts: &facts,
            image_env: &|name: &str| Some(format!("x/{name}:1")),
            config_maps: &|_| None,
            policy: None,
            server: gpu_operator_core::cache::server_facts::ServerFacts::unknown(),
        };
        let mut spec = ClusterPolicySpec::default();
        assert!(validate(&spec, &cluster).unwrap().is_none());
        spec.node_status_exporter.enabled = Some(true);
        let input = validate(&spec, &cluster).unwrap().unwrap();
        assert_eq!(input.image, "x/VALIDATOR_IMAGE:1");
        assert!(!input.service_monitor);
    }
}
