//! The VFIO manager operand (sandbox workloads only, as NVIDIA's): DaemonSet `nvidia-vfio-manager`
//! on nodes labelled `nvidia.com/gpu.deploy.vfio-manager=true` (the labeller sets that gate on
//! `vm-passthrough` nodes), which unloads the NVIDIA driver with k8s-driver-manager, then binds
//! every NVIDIA GPU of the node to `vfio-pci` for passthrough to virtual machines (and unbinds
//! them when the pod stops); its ServiceAccount and RBAC. Deployed when `sandboxWorkloads.enabled`
//! and `vfioManager.enabled` are both true. Pure validate and render steps.

mod render;
mod validate;

use gpu_operator_api::{ClusterPolicy, ClusterPolicySpec, conditions::operand::VFIO_MANAGER_READY};
use gpu_operator_core::{
    Error,
    contract::{Children, Cluster, ImageEnv, Operand},
};

pub use validate::Input;

/// Name of the DaemonSet, its main container, ServiceAccount, ClusterRole, binding and `app`
/// label, as NVIDIA names them.
pub const NAME: &str = "nvidia-vfio-manager";

/// The VFIO manager operand.
pub struct VfioManager;

impl Operand for VfioManager {
    type Owner = ClusterPolicy;
    const NAME: &'static str = "vfio-manager";
    const CONDITION: &'static str = VFIO_MANAGER_READY;
    const SECTION: &'static str = "vfioManager";
    type Input = Input;
    /// Its own image, and the driver manager's (its init container), read as NVIDIA reads them.
    const IMAGES: &'static [ImageEnv] = &[
        ImageEnv {
            var: validate::IMAGE_ENV,
            chart_values: Some("vfioManager"),
        },
        ImageEnv {
            var: validate::MANAGER_IMAGE_ENV,
            chart_values: Some("driver.manager"),
        },
    ];

    fn validate(spec: &ClusterPolicySpec, cluster: &Cluster<'_>) -> Result<Option<Input>, Error> {
        validate::validate(spec, cluster)
    }

    /// Without sandbox workloads the section is not read at all (NVIDIA's rule).
    fn disabled_because(spec: &ClusterPolicySpec, _cluster: &Cluster<'_>) -> Option<String> {
        (!spec.sandbox_enabled()).then(|| {
            "sandboxWorkloads.enabled is not true: the VFIO manager runs only for sandbox \
             workloads, nothing deployed"
                .to_owned()
        })
    }

    fn render(input: &Input) -> Children {
        render::children(input)
    }
}
