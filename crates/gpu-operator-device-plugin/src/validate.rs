//! Checks the ClusterPolicy for the device plugin and resolves its image. Pure.

use gpu_operator_api::ClusterPolicySpec;
use gpu_operator_core::{Error, image};

/// What rendering the device plugin needs.
#[derive(Clone, Debug)]
pub struct Input {
    /// The resolved image reference.
    pub image: String,
    /// The ClusterPolicy spec it was validated from.
    pub spec: ClusterPolicySpec,
}

/// `Ok(None)` when `devicePlugin.enabled` is false (it defaults to true).
pub fn validate(
    spec: &ClusterPolicySpec,
    image_env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<Input>, Error> {
    if spec.device_plugin.enabled == Some(false) {
        return Ok(None);
    }
    let env = "DEVICE_PLUGIN_IMAGE";
    let image = image::resolve(
        "devicePlugin",
        &spec.device_plugin.image,
        env,
        image_env(env).as_deref(),
    )?;
    Ok(Some(Input {
        image,
        spec: spec.clone(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disabled_renders_nothing_and_a_missing_image_names_the_component() {
        let mut spec = ClusterPolicySpec::default();
        assert!(
            validate(&spec, &|_| Some(
                "nvcr.io/nvidia/k8s-device-plugin:v0.17.0".into()
            ))
            .unwrap()
            .is_some()
        );
        let error = validate(&spec, &|_| None).unwrap_err().to_string();
        assert!(
            error.contains("devicePlugin") && error.contains("DEVICE_PLUGIN_IMAGE"),
            "{error}"
        );
        spec.device_plugin.enabled = Some(false);
        assert!(validate(&spec, &|_| None).unwrap().is_none());
    }
}
