//! The components the validator checks, by the names `COMPONENT` and the subcommand use
//! (NVIDIA's): the container stack's four and the sandbox (virtual-machine) ones.

use std::{fmt, str::FromStr};

use gpu_operator_api::validator::component;

use super::ConfigError;

/// What the validator checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Component {
    /// The driver.
    Driver,
    /// The container toolkit.
    Toolkit,
    /// A CUDA workload.
    Cuda,
    /// The device plugin.
    Plugin,
    /// Sandbox: the NVIDIA GPUs are bound to `vfio-pci`.
    VfioPci,
    /// Sandbox: the vGPU host driver works.
    VgpuManager,
    /// Sandbox: vGPU devices exist.
    VgpuDevices,
    /// Sandbox: the CC manager set the node's confidential-computing mode.
    CcManager,
}

impl Component {
    /// The name used by `COMPONENT` and as subcommand.
    pub fn name(self) -> &'static str {
        match self {
            Self::Driver => component::DRIVER,
            Self::Toolkit => component::TOOLKIT,
            Self::Cuda => component::CUDA,
            Self::Plugin => component::PLUGIN,
            Self::VfioPci => component::VFIO_PCI,
            Self::VgpuManager => component::VGPU_MANAGER,
            Self::VgpuDevices => component::VGPU_DEVICES,
            Self::CcManager => component::CC_MANAGER,
        }
    }

    /// Every component, container stack first.
    pub const ALL: [Self; 8] = [
        Self::Driver,
        Self::Toolkit,
        Self::Cuda,
        Self::Plugin,
        Self::VfioPci,
        Self::VgpuManager,
        Self::VgpuDevices,
        Self::CcManager,
    ];

    /// Whether it is one of the sandbox (virtual-machine) components, which read the node's
    /// labels and take no part in `GPUStackReady`.
    pub fn is_sandbox(self) -> bool {
        matches!(
            self,
            Self::VfioPci | Self::VgpuManager | Self::VgpuDevices | Self::CcManager
        )
    }
}

impl fmt::Display for Component {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Component {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| ConfigError::UnknownComponent(s.to_owned()))
    }
}
