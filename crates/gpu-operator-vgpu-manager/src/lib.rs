//! The vGPU manager operand (sandbox workloads only, as NVIDIA's `state-vgpu-manager`): DaemonSet
//! `nvidia-vgpu-manager-daemonset` on nodes labelled `nvidia.com/gpu.deploy.vgpu-manager=true`
//! (the labeller sets that gate on `vm-vgpu` nodes), which unloads any NVIDIA driver with
//! k8s-driver-manager, then installs and loads the vGPU host driver from the user's image (NVIDIA
//! ships none: it is built from the vGPU host driver package); its ServiceAccount and RBAC.
//! Deployed when `sandboxWorkloads.enabled` and `vgpuManager.enabled` are both true, unless
//! `driver.useNvidiaDriverCRD` hands it to NVIDIADriver objects (`driverType:
//! vgpu-host-manager`, rendered by `gpu-operator-driver`). Pure validate and render steps.
//!
//! One DaemonSet for one OS (NVIDIA's ClusterPolicy renders one too): with GPU nodes of several
//! OSes, the others get no vGPU manager and a warning says so (see `validate`). Per-OS pools, as
//! the driver has, are the NVIDIADriver's way.

mod render;
mod validate;

use gpu_operator_api::{ClusterPolicy, ClusterPolicySpec, conditions::operand::VGPU_MANAGER_READY};
use gpu_operator_core::{
    Error,
    contract::{Children, Cluster, ImageEnv, Operand, Warning},
};

pub use validate::{ForOs, Input};

/// Name of the DaemonSet and its `app` label, as NVIDIA names them.
pub const DAEMONSET: &str = "nvidia-vgpu-manager-daemonset";
/// Name of the ServiceAccount, ClusterRole and binding, as NVIDIA names them.
pub const SERVICE_ACCOUNT: &str = "nvidia-vgpu-manager";
/// Name of the vGPU manager container, as NVIDIA names it.
pub const CONTAINER: &str = "nvidia-vgpu-manager-ctr";

/// The vGPU manager operand.
pub struct VgpuManager;

impl Operand for VgpuManager {
    type Owner = ClusterPolicy;
    const NAME: &'static str = "vgpu-manager";
    const CONDITION: &'static str = VGPU_MANAGER_READY;
    const SECTION: &'static str = "vgpuManager";
    type Input = Input;
    /// Its own image, and the driver manager's (its init container), read as NVIDIA reads them.
    const IMAGES: &'static [ImageEnv] = &[
        ImageEnv {
            var: validate::IMAGE_ENV,
            chart_values: Some("vgpuManager"),
        },
        ImageEnv {
            var: validate::MANAGER_IMAGE_ENV,
            chart_values: Some("driver.manager"),
        },
    ];

    fn validate(spec: &ClusterPolicySpec, cluster: &Cluster<'_>) -> Result<Option<Input>, Error> {
        validate::validate(spec, cluster)
    }

    /// Without sandbox workloads the section is not read at all (NVIDIA's rule); with
    /// `driver.useNvidiaDriverCRD` NVIDIADriver objects deploy the vGPU manager.
    fn disabled_because(spec: &ClusterPolicySpec, _cluster: &Cluster<'_>) -> Option<String> {
        if !spec.sandbox_enabled() {
            return Some(
                "sandboxWorkloads.enabled is not true: the vGPU manager runs only for sandbox \
                 workloads, nothing deployed"
                    .to_owned(),
            );
        }
        (spec.vgpu_manager_enabled() && validate::managed_by_nvidia_drivers(spec)).then(|| {
            "driver.useNvidiaDriverCRD is true: the vGPU manager is deployed by NVIDIADriver \
             objects (driverType vgpu-host-manager)"
                .to_owned()
        })
    }

    /// With `driver.useNvidiaDriverCRD: true` NVIDIA deletes its vGPU manager DaemonSets
    /// orphaning their pods, which keep the host driver loaded until the NVIDIADrivers' pods
    /// replace them.
    fn hands_over(spec: &ClusterPolicySpec, _cluster: &Cluster<'_>) -> bool {
        validate::managed_by_nvidia_drivers(spec)
    }

    fn render(input: &Input) -> Children {
        render::children(input)
    }

    fn unserved(input: &Input) -> Option<String> {
        input.unserved.clone()
    }

    /// `vm-vgpu` nodes of other OSes than the one the DaemonSet serves.
    fn warnings(input: &Input) -> Vec<Warning> {
        let Some(served) = &input.os else {
            return Vec::new();
        };
        if input.other_oses.is_empty() {
            return Vec::new();
        }
        vec![Warning {
            reason: "VGPUManagerOtherOS",
            message: format!(
                "the vm-vgpu nodes run several OSes: {DAEMONSET} runs the vGPU host driver image for \
                 {} on those nodes only, and vm-vgpu nodes of {} get no vGPU manager; to serve \
                 several OSes set driver.useNvidiaDriverCRD=true with one NVIDIADriver of \
                 driverType vgpu-host-manager per OS",
                served.image_os_tag(),
                input.other_oses.join(", ")
            ),
        }]
    }
}

impl ForOs {
    /// The OS tag of the image (`ubuntu22.04`, `rhel9`).
    pub fn image_os_tag(&self) -> String {
        gpu_operator_core::build::image::os_tag(&self.os)
    }
}
