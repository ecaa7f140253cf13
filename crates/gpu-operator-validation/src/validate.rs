//! Resolves the validator image (the validator always runs, as NVIDIA's does). Pure.

use gpu_operator_api::ClusterPolicySpec;
use gpu_operator_core::{Error, image};

/// What rendering the validator needs.
#[derive(Clone, Debug)]
pub struct Input {
    /// The resolved image reference.
    pub image: String,
    /// The ClusterPolicy spec it was validated from.
    pub spec: ClusterPolicySpec,
    /// The operator namespace (subject of the validator's role bindings).
    pub namespace: String,
}

/// The validator has no `enabled` switch; only its image must resolve.
pub fn validate(
    spec: &ClusterPolicySpec,
    namespace: &str,
    image_env: &dyn Fn(&str) -> Option<String>,
) -> Result<Input, Error> {
    let env = "VALIDATOR_IMAGE";
    let section = spec.validator.clone().unwrap_or_default();
    let image = image::resolve("validator", &section.image, env, image_env(env).as_deref())?;
    Ok(Input {
        image,
        spec: spec.clone(),
        namespace: namespace.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_image_comes_from_the_spec_or_the_environment() {
        let spec = ClusterPolicySpec::default();
        assert_eq!(
            validate(&spec, "gpu-operator", &|_| Some(
                "ghcr.io/x/gpu-operator:1".into()
            ))
            .unwrap()
            .image,
            "ghcr.io/x/gpu-operator:1"
        );
        let error = validate(&spec, "gpu-operator", &|_| None)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("validator") && error.contains("VALIDATOR_IMAGE"),
            "{error}"
        );
    }
}
