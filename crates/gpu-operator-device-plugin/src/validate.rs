//! Checks the ClusterPolicy for the device plugin and resolves its image and the validator image
//! (its `toolkit-validation` init container waits on the validator). Pure.

use gpu_operator_api::ClusterPolicySpec;
use gpu_operator_core::{
    Error,
    build::{
        component::Component,
        runtime_class::{self, GpuAccess},
        shared::Shared,
        user_config::Checked,
    },
    cache::facts::NodeSample,
    contract::Cluster,
};

use gpu_operator_plugin_config::{config_manager, mig};

use crate::CONFIGS;

/// What rendering the device plugin needs.
#[derive(Clone, Debug)]
pub struct Input {
    /// The resolved device plugin image (also the MPS daemon's and the config manager's).
    pub image: String,
    /// The resolved validator image, for the barrier init container.
    pub validator_image: String,
    /// How the pods reach the GPUs (RuntimeClass or NRI annotation).
    pub gpu_access: GpuAccess,
    /// The checked copy of the `devicePlugin.config` ConfigMap, when one is named.
    pub configs: Option<Checked>,
    /// GPU nodes that run the plugin's built-in settings although `devicePlugin.config.name`
    /// names a configuration: no `default` is set and they carry no config label.
    pub unconfigured_nodes: Option<NodeSample>,
    /// The operator namespace (subject of the role bindings).
    pub namespace: String,
    /// `spec.devicePlugin`'s container settings (also the MPS daemon's).
    pub component: Component,
    /// `devicePlugin.config.name`, empty when unset.
    pub config_name: String,
    /// `devicePlugin.config.default`, empty when unset.
    pub config_default: String,
    /// `devicePlugin.mps.root`, by default `MpsConfig::DEFAULT_ROOT`.
    pub mps_root: String,
    /// The MIG strategy env of the plugin and the MPS daemon (`spec.mig`).
    pub mig_env: Vec<(&'static str, String)>,
    /// Whether GPUDirect Storage is on (`gds.enabled`).
    pub gds_enabled: bool,
    /// Whether GDRCopy is on (`gdrcopy.enabled`).
    pub gdrcopy_enabled: bool,
    /// Whether CDI is enabled (`cdi.enabled`, default true).
    pub cdi_enabled: bool,
    /// The toolkit's CDI hook, when CDI is on and the operator deploys the toolkit.
    pub cdi_hook_path: Option<String>,
    /// The settings every operand pod shares.
    pub shared: Shared,
}

/// `Ok(None)` when `devicePlugin.enabled` is false (it defaults to true).
pub fn validate(spec: &ClusterPolicySpec, cluster: &Cluster<'_>) -> Result<Option<Input>, Error> {
    if !spec.device_plugin_enabled() {
        return Ok(None);
    }
    Ok(Some(Input {
        image: cluster.image(
            "devicePlugin",
            &spec.device_plugin.image,
            "DEVICE_PLUGIN_IMAGE",
        )?,
        validator_image: cluster.validator_image(spec)?,
        gpu_access: GpuAccess::of(spec, cluster.facts),
        configs: config_manager::check(spec, cluster, CONFIGS)?,
        unconfigured_nodes: unconfigured_nodes(
            spec,
            &cluster.facts.gpu_nodes_without_plugin_config,
        ),
        namespace: cluster.namespace.to_owned(),
        component: Component::of(
            &spec.device_plugin.image,
            &spec.device_plugin.container,
            spec.device_plugin.host_network,
        ),
        config_name: spec
            .device_plugin
            .config
            .as_ref()
            .and_then(|c| c.name.clone())
            .unwrap_or_default(),
        config_default: config_manager::default_config(spec),
        mps_root: spec.device_plugin.mps_root().to_owned(),
        mig_env: mig::strategy_env(spec.mig.as_ref()),
        gds_enabled: spec.gds_enabled(),
        gdrcopy_enabled: spec.gdrcopy_enabled(),
        cdi_enabled: runtime_class::cdi_enabled(spec),
        cdi_hook_path: runtime_class::cdi_hook_path(spec),
        shared: Shared::of(spec),
    }))
}

/// `unlabelled` when a configuration is named without a default and some GPU nodes have no
/// label choosing one of its keys.
fn unconfigured_nodes(spec: &ClusterPolicySpec, unlabelled: &NodeSample) -> Option<NodeSample> {
    let config = spec.device_plugin.config.as_ref()?;
    let named = config.name.as_deref().is_some_and(|n| !n.is_empty());
    let defaulted = config.default.as_deref().is_some_and(|d| !d.is_empty());
    (named && !defaulted && unlabelled.count > 0).then(|| unlabelled.clone())
}

/// `spec` validated as the operator would on default facts, with the fixtures' images and
/// device plugin configurations.
#[cfg(test)]
pub fn for_tests(spec: &ClusterPolicySpec) -> Input {
    use gpu_operator_core::fixtures;

    match fixtures::with_cluster(&fixtures::image_env, |cluster| validate(spec, cluster)) {
        Ok(Some(input)) => input,
        other => panic!("{spec:?} does not validate: {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(
        spec: &ClusterPolicySpec,
        image_env: &(dyn Fn(&str) -> Option<String> + Sync),
    ) -> Result<Option<Input>, Error> {
        gpu_operator_core::fixtures::with_cluster(image_env, |cluster| validate(spec, cluster))
    }

    #[test]
    fn disabled_renders_nothing_and_a_missing_image_names_the_component() {
        let images = |name: &str| Some(format!("registry.example.com/{name}:1"));
        let mut spec = ClusterPolicySpec::default();
        let input = check(&spec, &images).unwrap().unwrap();
        assert_eq!(input.image, "registry.example.com/DEVICE_PLUGIN_IMAGE:1");
        assert_eq!(
            input.validator_image,
            "registry.example.com/VALIDATOR_IMAGE:1"
        );
        let error = check(&spec, &|_| None).unwrap_err().to_string();
        assert!(
            error.contains("devicePlugin") && error.contains("DEVICE_PLUGIN_IMAGE"),
            "{error}"
        );
        let no_validator = |name: &str| (name != "VALIDATOR_IMAGE").then(|| "x:1".to_owned());
        let error = check(&spec, &no_validator).unwrap_err().to_string();
        assert!(error.contains("VALIDATOR_IMAGE"), "{error}");
        spec.device_plugin.enabled = Some(false);
        assert!(check(&spec, &|_| None).unwrap().is_none());
    }
}
