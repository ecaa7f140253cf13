//! Checks the ClusterPolicy for GPU Feature Discovery and resolves its image, the validator image
//! (barrier) and, with `devicePlugin.config`, the device plugin image (the config manager). Pure.

use gpu_operator_api::ClusterPolicySpec;
use gpu_operator_core::{
    Error,
    build::{component::Component, runtime_class::GpuAccess, shared::Shared, user_config::Checked},
    contract::Cluster,
};

use gpu_operator_plugin_config::{config_manager, mig};

use crate::CONFIGS;

/// What rendering GFD needs.
#[derive(Clone, Debug)]
pub struct Input {
    /// The resolved GFD image.
    pub image: String,
    /// The resolved validator image, for the barrier init container.
    pub validator_image: String,
    /// The resolved device plugin image when `devicePlugin.config.name` is set.
    pub config_manager_image: Option<String>,
    /// How the pods reach the GPUs (RuntimeClass or NRI annotation).
    pub gpu_access: GpuAccess,
    /// The checked copy of the `devicePlugin.config` ConfigMap, when one is named.
    pub configs: Option<Checked>,
    /// The operator namespace (subject of the role bindings).
    pub namespace: String,
    /// `spec.gfd`'s container settings.
    pub component: Component,
    /// `devicePlugin.config.default`, empty when unset.
    pub config_default: String,
    /// The MIG strategy env (`spec.mig`).
    pub mig_env: Vec<(&'static str, String)>,
    /// The settings every operand pod shares.
    pub shared: Shared,
}

/// `Ok(None)` when `gfd.enabled` is false (it defaults to true).
pub fn validate(spec: &ClusterPolicySpec, cluster: &Cluster<'_>) -> Result<Option<Input>, Error> {
    if spec.gfd.enabled == Some(false) {
        return Ok(None);
    }
    let configs = config_manager::check(spec, cluster, CONFIGS)?;
    let config_manager_image = if configs.is_some() {
        Some(cluster.image(
            "devicePlugin",
            &spec.device_plugin.image,
            "DEVICE_PLUGIN_IMAGE",
        )?)
    } else {
        None
    };
    Ok(Some(Input {
        image: cluster.image("gfd", &spec.gfd.image, "GFD_IMAGE")?,
        validator_image: cluster.validator_image(spec)?,
        config_manager_image,
        gpu_access: GpuAccess::of(spec, cluster.facts),
        configs,
        namespace: cluster.namespace.to_owned(),
        component: Component::of(&spec.gfd.image, &spec.gfd.container, spec.gfd.host_network),
        config_default: config_manager::default_config(spec),
        mig_env: mig::strategy_env(spec.mig.as_ref()),
        shared: Shared::of(spec),
    }))
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
    use gpu_operator_api::spec::DevicePluginConfig;

    use super::*;

    fn check(
        spec: &ClusterPolicySpec,
        image_env: &(dyn Fn(&str) -> Option<String> + Sync),
    ) -> Result<Option<Input>, Error> {
        gpu_operator_core::fixtures::with_cluster(image_env, |cluster| validate(spec, cluster))
    }

    #[test]
    fn disabled_renders_nothing_and_missing_images_name_the_component() {
        let images = |name: &str| Some(format!("registry.example.com/{name}:1"));
        let mut spec = ClusterPolicySpec::default();
        let input = check(&spec, &images).unwrap().unwrap();
        assert_eq!(input.image, "registry.example.com/GFD_IMAGE:1");
        assert_eq!(input.config_manager_image, None);
        let error = check(&spec, &|_| None).unwrap_err().to_string();
        assert!(
            error.contains("gfd") && error.contains("GFD_IMAGE"),
            "{error}"
        );
        spec.device_plugin.config = Some(DevicePluginConfig {
            name: Some("c".into()),
            default: None,
        });
        let no_plugin = |name: &str| (name != "DEVICE_PLUGIN_IMAGE").then(|| "x:1".to_owned());
        let error = check(&spec, &no_plugin).unwrap_err().to_string();
        assert!(error.contains("DEVICE_PLUGIN_IMAGE"), "{error}");
        spec.gfd.enabled = Some(false);
        assert!(check(&spec, &|_| None).unwrap().is_none());
    }
}
