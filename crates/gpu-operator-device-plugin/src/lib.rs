//! The device plugin operand, NVIDIA's `state-device-plugin` and `state-mps-control-daemon` (one
//! reconciler: both follow `spec.devicePlugin` and share the `DevicePluginReady` condition):
//! `nvidia-device-plugin-daemonset` on nodes labelled `nvidia.com/gpu.deploy.device-plugin=true`,
//! `nvidia-device-plugin-mps-control-daemon` on those of them that are also
//! `nvidia.com/mps.capable=true`, their entrypoint ConfigMap, ServiceAccounts and RBAC. Pure
//! validate and render steps; the shared pipeline in `gpu_operator_core::operand` does the rest.

mod render;
mod validate;

use gpu_operator_api::{ClusterPolicySpec, conditions::operand::DEVICE_PLUGIN_READY};
use gpu_operator_core::{
    Error,
    operand::{Children, Cluster, Operand, Warning},
    user_config::Checked,
};

pub use validate::Input;

/// Name of the device plugin DaemonSet, as NVIDIA names it.
pub const DAEMONSET: &str = "nvidia-device-plugin-daemonset";
/// Name of the device plugin's ServiceAccount and RBAC, as NVIDIA names them.
pub const SERVICE_ACCOUNT: &str = "nvidia-device-plugin";
/// Name of the MPS control daemon DaemonSet, its ServiceAccount and RBAC, as NVIDIA names them.
pub const MPS_DAEMONSET: &str = "nvidia-device-plugin-mps-control-daemon";
/// The operator's checked copy of the ConfigMap `devicePlugin.config.name` names, which the
/// device plugin and the MPS control daemon mount.
pub const CONFIGS: &str = "nvidia-device-plugin-configs";
/// The ConfigMap with the device plugin's entrypoint script, as NVIDIA names it.
pub const ENTRYPOINT_CONFIG_MAP: &str = "nvidia-device-plugin-entrypoint";

/// The device plugin operand.
pub struct DevicePlugin;

impl Operand for DevicePlugin {
    const NAME: &'static str = "device-plugin";
    const CONDITION: &'static str = DEVICE_PLUGIN_READY;
    const SECTION: &'static str = "devicePlugin";
    type Input = Input;

    fn validate(spec: &ClusterPolicySpec, cluster: &Cluster<'_>) -> Result<Option<Input>, Error> {
        validate::validate(spec, cluster)
    }

    fn render(input: &Input) -> Children {
        render::children(input)
    }

    fn warnings(input: &Input) -> Vec<Warning> {
        config_warnings(input.configs.as_ref())
    }
}

/// What the checked `devicePlugin.config` ConfigMap holds that the device plugin would ignore.
fn config_warnings(configs: Option<&Checked>) -> Vec<Warning> {
    configs
        .iter()
        .flat_map(|c| &c.warnings)
        .map(|message| Warning {
            reason: "ConfigIgnored",
            message: format!("{message} (the device plugin accepts it but ignores it)"),
        })
        .collect()
}
