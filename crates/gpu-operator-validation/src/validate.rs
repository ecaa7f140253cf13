//! Resolves the validator image (the validator always runs, as NVIDIA's does). Pure.

use gpu_operator_api::ClusterPolicySpec;
use gpu_operator_core::{Error, operand::Cluster, runtime_class::GpuAccess};

/// What rendering the validator needs.
#[derive(Clone, Debug)]
pub struct Input {
    /// The resolved image reference.
    pub image: String,
    /// The ClusterPolicy spec it was validated from.
    pub spec: ClusterPolicySpec,
    /// How the pods reach the GPUs, and the RuntimeClass of the workload pods the `cuda` and
    /// `plugin` checks start.
    pub gpu_access: GpuAccess,
    /// The operator namespace (subject of the validator's role bindings).
    pub namespace: String,
}

/// The validator has no `enabled` switch; only its image must resolve.
pub fn validate(spec: &ClusterPolicySpec, cluster: &Cluster<'_>) -> Result<Input, Error> {
    Ok(Input {
        image: cluster.validator_image(spec)?,
        gpu_access: GpuAccess::of(spec, cluster.facts),
        spec: spec.clone(),
        namespace: cluster.namespace.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(
        spec: &ClusterPolicySpec,
        image_env: &(dyn Fn(&str) -> Option<String> + Sync),
    ) -> Result<Input, Error> {
        gpu_operator_core::fixtures::with_cluster(image_env, |cluster| validate(spec, cluster))
    }

    #[test]
    fn the_image_comes_from_the_spec_or_the_environment() {
        let spec = ClusterPolicySpec::default();
        assert_eq!(
            check(&spec, &|_| Some("ghcr.io/x/gpu-operator:1".into()))
                .unwrap()
                .image,
            "ghcr.io/x/gpu-operator:1"
        );
        let error = check(&spec, &|_| None).unwrap_err().to_string();
        assert!(
            error.contains("validator") && error.contains("VALIDATOR_IMAGE"),
            "{error}"
        );
    }
}
