//! Checks the ClusterPolicy for the sandbox validator and resolves the validator image
//! (`validator`, else `VALIDATOR_IMAGE`). Pure.

use gpu_operator_api::{
    ClusterPolicySpec,
    spec::{EnvVar, ValidatorComponentSpec, WorkloadConfig},
};
use gpu_operator_core::{
    Error,
    build::{component::Component, shared::Shared},
    contract::Cluster,
};

/// What rendering the sandbox validator needs.
#[derive(Clone, Debug)]
pub struct Input {
    /// The resolved validator image.
    pub image: String,
    /// `spec.validator`'s container settings.
    pub component: Component,
    /// The user's env of each sandbox check.
    pub check_env: CheckEnv,
    /// Whether the `cc-manager` check runs (`ccManager.enabled: true`).
    pub cc_manager: bool,
    /// `sandboxWorkloads.defaultWorkload` (`container` when unset), the workload type of nodes
    /// without a valid `nvidia.com/gpu.workload.config` label.
    pub default_workload: WorkloadConfig,
    /// The settings every operand pod shares.
    pub shared: Shared,
    /// The operator namespace (the binding's subject).
    pub namespace: String,
}

/// The user's env of the sandbox checks that have a section in `spec.validator` (NVIDIA's: the
/// `cc-manager` check has none), empty when unset.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CheckEnv {
    /// `validator.vfioPCI.env`.
    pub vfio_pci: Vec<EnvVar>,
    /// `validator.vgpuManager.env`.
    pub vgpu_manager: Vec<EnvVar>,
    /// `validator.vgpuDevices.env`.
    pub vgpu_devices: Vec<EnvVar>,
}

/// `Ok(None)` unless sandbox workloads are on; an image that cannot be resolved is an error
/// naming the `validator` section.
pub fn validate(spec: &ClusterPolicySpec, cluster: &Cluster<'_>) -> Result<Option<Input>, Error> {
    if !spec.sandbox_validator_enabled() {
        return Ok(None);
    }
    let validator = spec.validator.clone().unwrap_or_default();
    let env = |check: Option<ValidatorComponentSpec>| check.and_then(|c| c.env).unwrap_or_default();
    Ok(Some(Input {
        image: cluster.validator_image(spec)?,
        component: Component::of(
            &validator.image,
            &validator.container,
            validator.host_network,
        ),
        check_env: CheckEnv {
            vfio_pci: env(validator.vfio_pci),
            vgpu_manager: env(validator.vgpu_manager),
            vgpu_devices: env(validator.vgpu_devices),
        },
        cc_manager: spec.cc_manager_enabled(),
        default_workload: spec
            .sandbox_workloads
            .as_ref()
            .and_then(|s| s.default_workload)
            .unwrap_or_default(),
        shared: Shared::of(spec),
        namespace: cluster.namespace.to_owned(),
    }))
}

#[cfg(test)]
mod tests;
