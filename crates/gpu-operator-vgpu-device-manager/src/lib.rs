//! The vGPU device manager operand (sandbox workloads only, as NVIDIA's): DaemonSet
//! `nvidia-vgpu-device-manager` on nodes labelled `nvidia.com/gpu.deploy.vgpu-device-manager=true`
//! (the labeller sets that gate on `vm-vgpu` nodes), which waits for the vGPU manager (host
//! driver) to be validated, then creates the vGPU devices the node's `nvidia.com/vgpu.config`
//! label selects (else `vgpuDeviceManager.config.default`) and reports in
//! `nvidia.com/vgpu.config.state`; the ConfigMap of its default configurations
//! (`default-vgpu-devices-config`, unless `vgpuDeviceManager.config.name` names the user's, which
//! is checked and mounted as the operator's copy), its ServiceAccount and RBAC. Deployed when
//! `sandboxWorkloads.enabled` and `vgpuDeviceManager.enabled` are both true. Pure validate and
//! render steps.

mod catalog;
mod config;
mod render;
mod validate;
mod vgpu_type;

use gpu_operator_api::{
    ClusterPolicy, ClusterPolicySpec, conditions::operand::VGPU_DEVICE_MANAGER_READY,
};
use gpu_operator_core::{
    Error,
    contract::{Children, Cluster, ImageEnv, Operand, Warning},
};

pub use catalog::default_config;
pub use config::configs;
pub use validate::Input;

/// Name of the DaemonSet, its main container, ServiceAccount, roles, bindings and `app` label, as
/// NVIDIA names them.
pub const NAME: &str = "nvidia-vgpu-device-manager";
/// The ConfigMap of the default vGPU device configurations (key `config.yaml`), NVIDIA's name.
pub const DEFAULT_CONFIG: &str = "default-vgpu-devices-config";
/// The operator's checked copy of the user's configuration ConfigMap
/// (`vgpuDeviceManager.config.name`), which the manager mounts instead of the user's.
pub const CUSTOM_CONFIG: &str = "nvidia-vgpu-device-manager-custom-config";

/// The vGPU device manager operand.
pub struct VgpuDeviceManager;

impl Operand for VgpuDeviceManager {
    type Owner = ClusterPolicy;
    const NAME: &'static str = "vgpu-device-manager";
    const CONDITION: &'static str = VGPU_DEVICE_MANAGER_READY;
    const SECTION: &'static str = "vgpuDeviceManager";
    type Input = Input;
    const IMAGES: &'static [ImageEnv] = &[ImageEnv {
        var: validate::IMAGE_ENV,
        chart_values: Some("vgpuDeviceManager"),
    }];

    fn validate(spec: &ClusterPolicySpec, cluster: &Cluster<'_>) -> Result<Option<Input>, Error> {
        validate::validate(spec, cluster)
    }

    /// Without sandbox workloads the section is not read at all (NVIDIA's rule).
    fn disabled_because(spec: &ClusterPolicySpec, _cluster: &Cluster<'_>) -> Option<String> {
        (!spec.sandbox_enabled()).then(|| {
            "sandboxWorkloads.enabled is not true: the vGPU device manager runs only for sandbox \
             workloads, nothing deployed"
                .to_owned()
        })
    }

    fn render(input: &Input) -> Children {
        render::children(input)
    }

    fn warnings(input: &Input) -> Vec<Warning> {
        validate::warnings(input)
    }
}
