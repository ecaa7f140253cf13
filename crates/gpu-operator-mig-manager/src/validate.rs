//! Checks the ClusterPolicy for the MIG manager, resolves its images and notices a seeded layout
//! that the default layouts lack. Pure.

use gpu_operator_api::{ClusterPolicySpec, spec::MigManagerSpec};
use gpu_operator_core::{
    Error,
    operand::{Cluster, Warning},
    runtime_class::GpuAccess,
};

use crate::{DEFAULT_CONFIG, profiles};

/// The layout seeded on MIG-capable nodes when `migManager.config.default` is unset.
const SEEDED_BY_DEFAULT: &str = "all-disabled";

/// What rendering the MIG manager needs.
#[derive(Clone, Debug)]
pub struct Input {
    /// The MIG manager image.
    pub image: String,
    /// The validator image, which runs the `toolkit-validation` barrier.
    pub validator_image: String,
    /// How the pods reach the GPUs (RuntimeClass or NRI annotation).
    pub gpu_access: GpuAccess,
    /// The operator namespace (role-binding subjects).
    pub namespace: String,
    /// The ClusterPolicy spec it was validated from.
    pub spec: ClusterPolicySpec,
}

impl Input {
    /// The MIG manager section.
    pub fn section(&self) -> MigManagerSpec {
        self.spec.mig_manager.clone().unwrap_or_default()
    }

    /// The user's layouts ConfigMap (`migManager.config.name`), if any.
    pub fn custom_config(&self) -> Option<String> {
        self.section()
            .config
            .and_then(|c| c.name)
            .filter(|n| !n.is_empty())
    }

    /// The user's GPU clients ConfigMap (`migManager.gpuClientsConfig.name`), if any.
    pub fn custom_gpu_clients(&self) -> Option<String> {
        self.section()
            .gpu_clients_config
            .and_then(|c| c.name)
            .filter(|n| !n.is_empty())
    }
}

/// `Ok(None)` when `migManager.enabled` is false (it defaults to true).
pub fn validate(spec: &ClusterPolicySpec, cluster: &Cluster<'_>) -> Result<Option<Input>, Error> {
    let section = spec.mig_manager.clone().unwrap_or_default();
    if section.enabled == Some(false) {
        return Ok(None);
    }
    let image = cluster.image("migManager", &section.image, "MIG_MANAGER_IMAGE")?;
    let validator_image = cluster.validator_image(spec)?;
    Ok(Some(Input {
        image,
        validator_image,
        gpu_access: GpuAccess::of(spec, cluster.facts),
        namespace: cluster.namespace.to_owned(),
        spec: spec.clone(),
    }))
}

/// A seeded layout (`migManager.config.default`) missing from the default layouts: every node
/// seeded with it would fail to partition. (A user's ConfigMap is not read here.)
pub fn warnings(input: &Input) -> Vec<Warning> {
    if input.custom_config().is_some() {
        return Vec::new();
    }
    let seeded = input
        .section()
        .config
        .and_then(|c| c.default)
        .unwrap_or_else(|| SEEDED_BY_DEFAULT.to_owned());
    if seeded.is_empty() || profiles::default_layouts().contains(&seeded) {
        return Vec::new();
    }
    vec![Warning {
        reason: "MIGConfigNotFound",
        message: format!(
            "migManager.config.default is {seeded:?}, which is not a layout of ConfigMap \
             {DEFAULT_CONFIG} (such as all-disabled, all-balanced or all-1g.10gb), so MIG-capable \
             nodes seeded with it fail to partition: set it to one of that ConfigMap's layouts, \
             or set migManager.config.name to a ConfigMap whose config.yaml defines {seeded:?}"
        ),
    }]
}

#[cfg(test)]
mod tests {
    use gpu_operator_api::spec::MigPartedConfigSpec;
    use gpu_operator_core::facts::ClusterFacts;

    use super::*;

    fn input(config: Option<MigPartedConfigSpec>, enabled: Option<bool>) -> Option<Input> {
        let facts = ClusterFacts::default();
        let cluster = Cluster {
            namespace: "gpu-operator",
            facts: &facts,
            image_env: &|name: &str| Some(format!("x/{name}:1")),
        };
        let spec = ClusterPolicySpec {
            mig_manager: Some(MigManagerSpec {
                enabled,
                config,
                ..MigManagerSpec::default()
            }),
            ..ClusterPolicySpec::default()
        };
        validate(&spec, &cluster).unwrap()
    }

    fn seeded(default: &str, name: Option<&str>) -> Vec<Warning> {
        let config = MigPartedConfigSpec {
            name: name.map(Into::into),
            default: Some(default.into()),
        };
        warnings(&input(Some(config), None).unwrap())
    }

    #[test]
    fn disabled_renders_nothing() {
        assert!(input(None, Some(false)).is_none());
        assert!(input(None, None).is_some());
    }

    #[test]
    fn a_seeded_layout_missing_from_the_defaults_is_reported_by_name() {
        assert!(seeded("all-1g.10gb", None).is_empty());
        assert!(seeded("", None).is_empty());
        assert!(warnings(&input(None, None).unwrap()).is_empty());
        let missing = seeded("all-9g.99gb", None);
        assert_eq!(missing[0].reason, "MIGConfigNotFound");
        assert!(
            missing[0].message.contains("\"all-9g.99gb\"")
                && missing[0].message.contains(DEFAULT_CONFIG),
            "{}",
            missing[0].message
        );
        assert!(
            seeded("all-9g.99gb", Some("mine")).is_empty(),
            "a user's ConfigMap is not judged against the defaults"
        );
    }
}
