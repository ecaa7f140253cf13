//! What differs between the two sandbox device plugins, as NVIDIA names and builds them: names,
//! section, image variable, gate label, mode, the status files their barrier waits for, and the
//! few differences of their main container.

use gpu_operator_api::{
    labels::operand,
    spec::{SandboxMode, WorkloadConfig},
    validator::status_file,
};

/// One init container of the barrier: on nodes of workload type `workload` it waits for
/// `file`; on other nodes it returns at once.
#[derive(Debug)]
pub struct Wait {
    /// The init container's name (NVIDIA's: `<check>-validation`).
    pub container: &'static str,
    /// The workload type that needs the check.
    pub workload: WorkloadConfig,
    /// The status file the sandbox validator writes when the check passed.
    pub file: &'static str,
}

/// One sandbox device plugin.
#[derive(Debug)]
pub struct Flavor {
    /// In sentences: "KubeVirt GPU device plugin".
    pub title: &'static str,
    /// The sandbox mode it serves.
    pub mode: SandboxMode,
    /// The operand's name (the `app.kubernetes.io/component` label).
    pub component: &'static str,
    /// The ClusterPolicy section.
    pub section: &'static str,
    /// The operator's fallback variable of its image.
    pub image_env: &'static str,
    /// The DaemonSet (and its `app` label).
    pub daemonset: &'static str,
    /// ServiceAccount, Role, ClusterRole and their bindings.
    pub account: &'static str,
    /// The main container.
    pub container: &'static str,
    /// The `nvidia.com/gpu.deploy.<operand>` gate of its nodes.
    pub deploy_label: &'static str,
    /// The barrier's init containers, in NVIDIA's order.
    pub waits: &'static [Wait],
    /// Whether the plugin mounts the host's `/dev/vfio` (the KubeVirt one).
    pub dev_vfio: bool,
    /// Whether the plugin is told its ServiceAccount (`POD_SERVICE_ACCOUNT`, the Kata one).
    pub service_account_env: bool,
}

/// The `vfio-pci` wait (`vm-passthrough` nodes).
const VFIO_PCI: Wait = Wait {
    container: "vfio-pci-validation",
    workload: WorkloadConfig::VmPassthrough,
    file: status_file::VFIO_PCI,
};

/// The KubeVirt GPU device plugin (`sandboxDevicePlugin`): passthrough GPUs and vGPUs.
pub const KUBEVIRT: Flavor = Flavor {
    title: "KubeVirt GPU device plugin",
    mode: SandboxMode::Kubevirt,
    component: "sandbox-device-plugin",
    section: "sandboxDevicePlugin",
    image_env: "SANDBOX_DEVICE_PLUGIN_IMAGE",
    daemonset: "nvidia-sandbox-device-plugin-daemonset",
    account: "nvidia-sandbox-device-plugin",
    container: "nvidia-sandbox-device-plugin-ctr",
    deploy_label: operand::SANDBOX_DEVICE_PLUGIN,
    waits: &[
        VFIO_PCI,
        Wait {
            container: "vgpu-devices-validation",
            workload: WorkloadConfig::VmVgpu,
            file: status_file::VGPU_DEVICES,
        },
    ],
    dev_vfio: true,
    service_account_env: false,
};

/// The Kata sandbox device plugin (`kataSandboxDevicePlugin`): passthrough GPUs only.
pub const KATA: Flavor = Flavor {
    title: "Kata sandbox device plugin",
    mode: SandboxMode::Kata,
    component: "kata-sandbox-device-plugin",
    section: "kataSandboxDevicePlugin",
    image_env: "KATA_SANDBOX_DEVICE_PLUGIN_IMAGE",
    daemonset: "nvidia-kata-sandbox-device-plugin-daemonset",
    account: "nvidia-kata-sandbox-device-plugin",
    container: "nvidia-kata-sandbox-device-plugin-ctr",
    deploy_label: operand::KATA_SANDBOX_DEVICE_PLUGIN,
    waits: &[VFIO_PCI],
    dev_vfio: false,
    service_account_env: true,
};
