//! The confidential-computing manager operand (NVIDIA's `state-cc-manager`): DaemonSet
//! `nvidia-cc-manager` on nodes labelled `nvidia.com/gpu.deploy.cc-manager=true` (the labeller
//! sets that gate on `vm-passthrough` and `vm-vgpu` nodes), which sets the CC mode of the node's
//! GPUs as its `nvidia.com/cc.mode` label asks, else as `ccManager.defaultMode` says, pausing the
//! sandbox operands of its node meanwhile through their deploy labels and reporting in
//! `nvidia.com/cc.mode.state` and `nvidia.com/cc.ready.state`; its ServiceAccount and RBAC.
//! Deployed when `sandboxWorkloads.enabled`, `sandboxWorkloads.mode` is `kata` and
//! `ccManager.enabled` (NVIDIA's rule in `isStateEnabled`). Pure validate and render steps.

mod render;
mod validate;

use gpu_operator_api::{ClusterPolicy, ClusterPolicySpec, conditions::operand::CC_MANAGER_READY};
use gpu_operator_core::{
    Error,
    contract::{Children, Cluster, ImageEnv, Operand},
};

pub use validate::Input;

/// Name of the DaemonSet, its container, ServiceAccount, Role, ClusterRole, bindings and `app`
/// label, as NVIDIA names them.
pub const NAME: &str = "nvidia-cc-manager";

/// The confidential-computing manager operand.
pub struct CcManager;

impl Operand for CcManager {
    type Owner = ClusterPolicy;
    const NAME: &'static str = "cc-manager";
    const CONDITION: &'static str = CC_MANAGER_READY;
    const SECTION: &'static str = "ccManager";
    type Input = Input;
    const IMAGES: &'static [ImageEnv] = &[ImageEnv {
        var: validate::IMAGE_ENV,
        chart_values: Some("ccManager"),
    }];

    fn validate(spec: &ClusterPolicySpec, cluster: &Cluster<'_>) -> Result<Option<Input>, Error> {
        validate::validate(spec, cluster)
    }

    /// Without sandbox workloads in `kata` mode the section is not read at all (NVIDIA's rule).
    fn disabled_because(spec: &ClusterPolicySpec, _cluster: &Cluster<'_>) -> Option<String> {
        if !spec.sandbox_enabled() {
            return Some(
                "sandboxWorkloads.enabled is not true: the CC manager runs only for sandbox \
                 workloads, nothing deployed"
                    .to_owned(),
            );
        }
        (spec.sandbox_mode() != gpu_operator_api::spec::SandboxMode::Kata).then(|| {
            "sandboxWorkloads.mode is not kata: the CC manager runs only for Kata sandbox \
             workloads, nothing deployed"
                .to_owned()
        })
    }

    fn render(input: &Input) -> Children {
        render::children(input)
    }
}
