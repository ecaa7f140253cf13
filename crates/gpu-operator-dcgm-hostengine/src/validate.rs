//! Checks the ClusterPolicy for DCGM and resolves its images. Pure.

use gpu_operator_api::ClusterPolicySpec;
use gpu_operator_core::{
    Error,
    build::{component::Component, runtime_class::GpuAccess, shared::Shared},
    contract::Cluster,
};

use crate::Form;

/// What rendering DCGM needs.
#[derive(Clone, Debug)]
pub struct Input {
    /// The DCGM image.
    pub image: String,
    /// Whose host engine: the ClusterPolicy's or the GPUCluster's, and what that changes.
    pub form: Form,
    /// `spec.dcgm`'s container settings: env, args, resources, pull settings, host network.
    pub component: Component,
    /// The settings every operand pod shares.
    pub shared: Shared,
    /// The operator namespace (role-binding subjects).
    pub namespace: String,
}

impl Input {
    /// What rendering needs from `spec` (its `dcgm` section and shared settings), with the image
    /// resolved.
    pub fn new(spec: &ClusterPolicySpec, image: String, form: Form, namespace: &str) -> Self {
        Self {
            image,
            form,
            component: Component::of(
                &spec.dcgm.image,
                &spec.dcgm.container,
                spec.dcgm.host_network,
            ),
            shared: Shared::of(spec),
            namespace: namespace.to_owned(),
        }
    }
}

/// `Ok(None)` when `dcgm.enabled` is false. Unset means true, as in NVIDIA's API (its Helm chart
/// sets false, so the exporter uses its embedded engine).
pub fn validate(spec: &ClusterPolicySpec, cluster: &Cluster<'_>) -> Result<Option<Input>, Error> {
    if spec.dcgm.enabled == Some(false) {
        return Ok(None);
    }
    let image = cluster.image("dcgm", &spec.dcgm.image, "DCGM_IMAGE")?;
    let form = Form::ClusterPolicy {
        validator_image: cluster.validator_image(spec)?,
        gpu_access: GpuAccess::of(spec, cluster.facts),
    };
    Ok(Some(Input::new(spec, image, form, cluster.namespace)))
}

#[cfg(test)]
mod tests {
    use gpu_operator_core::cache::facts::ClusterFacts;

    use super::*;

    fn cluster<'a>(
        facts: &'a ClusterFacts,
        env: &'a (dyn Fn(&str) -> Option<String> + Sync),
    ) -> Cluster<'a> {
        Cluster {
            namespace: "gpu-operator",
            facts,
            image_env: env,
            config_maps: &|_| None,
            policy: None,
            server: gpu_operator_core::cache::server_facts::ServerFacts::unknown(),
        }
    }

    #[test]
    fn enabled_unless_false_and_a_missing_image_names_the_section() {
        let facts = ClusterFacts::default();
        let mut spec = ClusterPolicySpec::default();
        let all = |name: &str| Some(format!("x/{name}:1"));
        assert!(validate(&spec, &cluster(&facts, &all)).unwrap().is_some());
        let only_validator = |name: &str| (name == "VALIDATOR_IMAGE").then(|| "v:1".to_owned());
        let error = validate(&spec, &cluster(&facts, &only_validator))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("dcgm") && error.contains("DCGM_IMAGE"),
            "{error}"
        );
        spec.dcgm.enabled = Some(false);
        assert!(
            validate(&spec, &cluster(&facts, &|_| None))
                .unwrap()
                .is_none()
        );
    }
}
