//! Checks the ClusterPolicy for the device plugin and resolves its image and the validator image
//! (its `toolkit-validation` init container waits on the validator). Pure.

use gpu_operator_api::ClusterPolicySpec;
use gpu_operator_core::{Error, image};

/// What rendering the device plugin needs.
#[derive(Clone, Debug)]
pub struct Input {
    /// The resolved device plugin image (also the MPS daemon's and the config manager's).
    pub image: String,
    /// The resolved validator image, for the barrier init container.
    pub validator_image: String,
    /// The operator namespace (subject of the role bindings).
    pub namespace: String,
    /// The ClusterPolicy spec it was validated from.
    pub spec: ClusterPolicySpec,
}

/// `Ok(None)` when `devicePlugin.enabled` is false (it defaults to true).
pub fn validate(
    spec: &ClusterPolicySpec,
    namespace: &str,
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
    let env = "VALIDATOR_IMAGE";
    let validator = spec.validator.clone().unwrap_or_default();
    let validator_image = image::resolve(
        "validator",
        &validator.image,
        env,
        image_env(env).as_deref(),
    )?;
    Ok(Some(Input {
        image,
        validator_image,
        namespace: namespace.to_owned(),
        spec: spec.clone(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disabled_renders_nothing_and_a_missing_image_names_the_component() {
        let images = |name: &str| Some(format!("registry.example.com/{name}:1"));
        let mut spec = ClusterPolicySpec::default();
        let input = validate(&spec, "gpu-operator", &images).unwrap().unwrap();
        assert_eq!(input.image, "registry.example.com/DEVICE_PLUGIN_IMAGE:1");
        assert_eq!(
            input.validator_image,
            "registry.example.com/VALIDATOR_IMAGE:1"
        );
        let error = validate(&spec, "gpu-operator", &|_| None)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("devicePlugin") && error.contains("DEVICE_PLUGIN_IMAGE"),
            "{error}"
        );
        let no_validator = |name: &str| (name != "VALIDATOR_IMAGE").then(|| "x:1".to_owned());
        let error = validate(&spec, "gpu-operator", &no_validator)
            .unwrap_err()
            .to_string();
        assert!(error.contains("VALIDATOR_IMAGE"), "{error}");
        spec.device_plugin.enabled = Some(false);
        assert!(
            validate(&spec, "gpu-operator", &|_| None)
                .unwrap()
                .is_none()
        );
    }
}
