//! The validator operand: `nvidia-operator-validator`, its ServiceAccount and RBAC, on nodes labelled
//! `nvidia.com/gpu.deploy.operator-validator=true`. Its init containers run
//! `gpu-operator-validator` for the driver, toolkit, CUDA and device plugin in that order and leave
//! the status files other operands wait on; beside the idle main container, the `gpu-health`
//! container runs the GPU health agent (ours, `validator.health`). Pure validate and render steps.

mod render;
mod validate;

use gpu_operator_api::{ClusterPolicy, ClusterPolicySpec, conditions::operand::VALIDATOR_READY};
use gpu_operator_core::{
    Error,
    contract::{Children, Cluster, ImageEnv, Operand},
};

/// The validator's ClusterRole (what the chart's node-agent policy confines to its own node).
pub use render::rbac::cluster_role;
pub use validate::Input;

/// The operator's variable with its own image, which the GPU health agent's container runs.
pub const HEALTH_IMAGE_ENV: &str = "OPERATOR_IMAGE";

/// Name of the DaemonSet, its `app` label and its ServiceAccount, as NVIDIA names them.
pub const DAEMONSET: &str = "nvidia-operator-validator";

/// The validator operand.
pub struct Validation;

impl Operand for Validation {
    type Owner = ClusterPolicy;
    const NAME: &'static str = "operator-validation";
    const CONDITION: &'static str = VALIDATOR_READY;
    const SECTION: &'static str = "validator";
    type Input = Input;
    /// `CUDA_BASE_IMAGE` is read as NVIDIA's operator reads it; no image resolves from it yet.
    const IMAGES: &'static [ImageEnv] = &[
        ImageEnv {
            var: "VALIDATOR_IMAGE",
            chart_values: Some("validator"),
        },
        ImageEnv {
            var: "CUDA_BASE_IMAGE",
            chart_values: None,
        },
        // The operator's own image (set by the chart's Deployment, not from a values section):
        // the GPU health agent's container runs it.
        ImageEnv {
            var: HEALTH_IMAGE_ENV,
            chart_values: None,
        },
    ];

    fn validate(spec: &ClusterPolicySpec, cluster: &Cluster<'_>) -> Result<Option<Input>, Error> {
        validate::validate(spec, cluster).map(Some)
    }

    fn render(input: &Input) -> Children {
        render::children(input)
    }
}
