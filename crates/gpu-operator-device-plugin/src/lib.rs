//! The device plugin operand: `nvidia-device-plugin-daemonset` and its ServiceAccount, on nodes
//! labelled `nvidia.com/gpu.deploy.device-plugin=true`. Pure validate and render steps; the
//! shared pipeline in `gpu_operator_core::operand` does the rest.

mod render;
mod validate;

use gpu_operator_api::{ClusterPolicySpec, conditions::operand::DEVICE_PLUGIN_READY};
use gpu_operator_core::{
    Error,
    operand::{Children, Cluster, Operand},
};

pub use validate::Input;

/// Name of the DaemonSet, as NVIDIA names it.
pub const DAEMONSET: &str = "nvidia-device-plugin-daemonset";
/// Name of the ServiceAccount, as NVIDIA names it.
pub const SERVICE_ACCOUNT: &str = "nvidia-device-plugin";

/// The device plugin operand.
pub struct DevicePlugin;

impl Operand for DevicePlugin {
    const NAME: &'static str = "device-plugin";
    const CONDITION: &'static str = DEVICE_PLUGIN_READY;
    const SECTION: &'static str = "devicePlugin";
    type Input = Input;

    fn validate(spec: &ClusterPolicySpec, cluster: &Cluster<'_>) -> Result<Option<Input>, Error> {
        validate::validate(spec, cluster.image_env)
    }

    fn render(input: &Input) -> Children {
        render::children(input)
    }
}
