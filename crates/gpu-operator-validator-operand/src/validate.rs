//! Resolves the validator image (the validator always runs, as NVIDIA's does). Pure.

use gpu_operator_api::{
    ClusterPolicySpec,
    spec::{EnvVar, HealthSpec, MigStrategy, ValidatorComponentSpec},
};
use gpu_operator_core::{
    Error,
    build::{component::Component, runtime_class::GpuAccess, shared::Shared},
    contract::Cluster,
};

/// What rendering the validator needs.
#[derive(Clone, Debug)]
pub struct Input {
    /// The resolved image reference.
    pub image: String,
    /// `spec.validator`'s container settings (the pod's, and the pull settings its workload
    /// pods get).
    pub component: Component,
    /// The user's env of each check (`validator.{driver,toolkit,cuda,plugin}.env`).
    pub check_env: CheckEnv,
    /// Whether the validator lifts the startup taint (`validator.liftStartupTaint: true`).
    pub lift_startup_taint: bool,
    /// Whether the operator deploys the driver (`driver.enabled` unset or true).
    pub driver_managed: bool,
    /// Whether the device plugin is deployed (`devicePlugin.enabled` unset or true), so the
    /// `plugin` check runs.
    pub plugin_enabled: bool,
    /// The MIG strategy the device plugin runs with, which the `plugin` check expects.
    pub mig_strategy: MigStrategy,
    /// The settings every operand pod shares.
    pub shared: Shared,
    /// How the pods reach the GPUs, and the RuntimeClass of the workload pods the `cuda` and
    /// `plugin` checks start.
    pub gpu_access: GpuAccess,
    /// The operator namespace (subject of the validator's role bindings).
    pub namespace: String,
    /// The GPU health agent, when it runs.
    pub health: Option<HealthAgent>,
}

/// The GPU health agent's container settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HealthAgent {
    /// The operator's own image.
    pub image: String,
    /// `validator.health.pollIntervalSeconds`, default 30.
    pub poll_interval_seconds: u32,
    /// `validator.health.taintUnhealthy`.
    pub taint_unhealthy: bool,
}

/// The agent's poll interval when the policy names none.
pub const DEFAULT_HEALTH_POLL_SECONDS: u32 = 30;

impl HealthAgent {
    /// The agent's settings from `validator.health`, with `image` (the operator's own, when
    /// known); `None` when the agent is off or no image is known.
    pub fn of(spec: Option<&HealthSpec>, image: Option<String>) -> Option<Self> {
        if !HealthSpec::is_enabled(spec) {
            return None;
        }
        Some(Self {
            image: image?,
            poll_interval_seconds: spec
                .and_then(|h| h.poll_interval_seconds)
                .unwrap_or(DEFAULT_HEALTH_POLL_SECONDS),
            taint_unhealthy: spec.and_then(|h| h.taint_unhealthy) == Some(true),
        })
    }
}

/// The user's env of each check the validator pod runs, empty when unset.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CheckEnv {
    /// `validator.driver.env`.
    pub driver: Vec<EnvVar>,
    /// `validator.toolkit.env`.
    pub toolkit: Vec<EnvVar>,
    /// `validator.cuda.env`.
    pub cuda: Vec<EnvVar>,
    /// `validator.plugin.env`.
    pub plugin: Vec<EnvVar>,
}

impl Input {
    /// What rendering needs from `spec`, with the image, GPU access and namespace resolved.
    pub fn new(
        spec: &ClusterPolicySpec,
        image: String,
        gpu_access: GpuAccess,
        namespace: String,
        health_image: Option<String>,
    ) -> Self {
        let validator = spec.validator.clone().unwrap_or_default();
        let env =
            |check: Option<ValidatorComponentSpec>| check.and_then(|c| c.env).unwrap_or_default();
        Self {
            image,
            component: Component::of(
                &validator.image,
                &validator.container,
                validator.host_network,
            ),
            lift_startup_taint: validator.lift_startup_taint == Some(true),
            check_env: CheckEnv {
                driver: env(validator.driver),
                toolkit: env(validator.toolkit),
                cuda: env(validator.cuda),
                plugin: env(validator.plugin),
            },
            driver_managed: spec.driver_enabled(),
            plugin_enabled: spec.device_plugin_enabled(),
            mig_strategy: MigStrategy::of(spec.mig.as_ref()),
            shared: Shared::of(spec),
            gpu_access,
            namespace,
            health: HealthAgent::of(validator.health.as_ref(), health_image),
        }
    }
}

/// The validator has no `enabled` switch; only its image must resolve.
pub fn validate(spec: &ClusterPolicySpec, cluster: &Cluster<'_>) -> Result<Input, Error> {
    Ok(Input::new(
        spec,
        cluster.validator_image(spec)?,
        GpuAccess::of(spec, cluster.facts),
        cluster.namespace.to_owned(),
        (cluster.image_env)(crate::HEALTH_IMAGE_ENV),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_health_agent_is_on_by_default_and_needs_the_operators_image() {
        let image = || Some("ghcr.io/x/gpu-operator:1".to_owned());
        assert!(HealthAgent::of(None, image()).is_some());
        assert_eq!(
            HealthAgent::of(None, None),
            None,
            "no image of ours: no agent"
        );
        let off = HealthSpec {
            enabled: Some(false),
            ..HealthSpec::default()
        };
        assert_eq!(HealthAgent::of(Some(&off), image()), None);
        let tuned = HealthSpec {
            enabled: None,
            poll_interval_seconds: Some(10),
            taint_unhealthy: Some(true),
        };
        let agent = HealthAgent::of(Some(&tuned), image()).unwrap();
        assert_eq!(
            (agent.poll_interval_seconds, agent.taint_unhealthy),
            (10, true)
        );
    }

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
        let input = check(&spec, &|name| Some(format!("ghcr.io/x/{name}:1"))).unwrap();
        let health = input.health.unwrap();
        assert_eq!(
            health.image, "ghcr.io/x/OPERATOR_IMAGE:1",
            "the operator's own image"
        );
        assert_eq!(health.poll_interval_seconds, DEFAULT_HEALTH_POLL_SECONDS);
        assert!(!health.taint_unhealthy);
        let error = check(&spec, &|_| None).unwrap_err().to_string();
        assert!(
            error.contains("validator") && error.contains("VALIDATOR_IMAGE"),
            "{error}"
        );
    }
}
