//! The sandbox validator operand (sandbox workloads only, as NVIDIA's): DaemonSet
//! `nvidia-sandbox-validator` on nodes labelled `nvidia.com/gpu.deploy.sandbox-validator=true`
//! (the labeller sets that gate on `vm-passthrough` and `vm-vgpu` nodes). Its init containers run
//! our validator's sandbox checks in NVIDIA's order — `cc-manager` (only with `ccManager.enabled`),
//! `vfio-pci`, `vgpu-manager`, `vgpu-devices` — each waiting until it passes or finds its check
//! does not apply to the node's workload type, and leave the status files and the node's
//! `workload-type` the sandbox device plugins wait on; then an idle main container. Image and
//! settings are `spec.validator`'s. Deployed whenever `sandboxWorkloads.enabled` is true. Pure
//! validate and render steps.

mod render;
mod validate;

use gpu_operator_api::{
    ClusterPolicy, ClusterPolicySpec, conditions::operand::SANDBOX_VALIDATOR_READY,
};
use gpu_operator_core::{
    Error,
    contract::{Children, Cluster, ImageEnv, Operand},
};

pub use validate::Input;

/// Name of the DaemonSet, its main container, ServiceAccount, ClusterRole, binding and `app`
/// label, as NVIDIA names them.
pub const NAME: &str = "nvidia-sandbox-validator";

/// The sandbox validator operand.
pub struct SandboxValidator;

impl Operand for SandboxValidator {
    type Owner = ClusterPolicy;
    const NAME: &'static str = "sandbox-validation";
    const CONDITION: &'static str = SANDBOX_VALIDATOR_READY;
    const SECTION: &'static str = "validator";
    type Input = Input;
    /// None of its own: it runs the validator image, which the validator operand reads.
    const IMAGES: &'static [ImageEnv] = &[];

    fn validate(spec: &ClusterPolicySpec, cluster: &Cluster<'_>) -> Result<Option<Input>, Error> {
        validate::validate(spec, cluster)
    }

    /// Without sandbox workloads nothing is deployed (NVIDIA's rule).
    fn disabled_because(spec: &ClusterPolicySpec, _cluster: &Cluster<'_>) -> Option<String> {
        (!spec.sandbox_validator_enabled()).then(|| {
            "sandboxWorkloads.enabled is not true: the sandbox validator runs only for sandbox \
             workloads, nothing deployed"
                .to_owned()
        })
    }

    fn render(input: &Input) -> Children {
        render::children(input)
    }
}
