//! The parts of `NVIDIADriver.spec` whose JSON differs from `ClusterPolicy.spec.driver`: the
//! driver type, and the repository, licensing and virtual topology sections (NVIDIA names their
//! ConfigMap `name` here, `configMapName` or `config` in the ClusterPolicy).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Which NVIDIA driver an NVIDIADriver runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum DriverType {
    /// The data-center GPU driver.
    #[default]
    Gpu,
    /// The vGPU guest driver, for virtual machines with an NVIDIA vGPU.
    Vgpu,
    /// The vGPU manager, the host driver of hypervisors that hand out vGPUs.
    VgpuHostManager,
}

impl DriverType {
    /// The value as written in `spec.driverType`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Gpu => "gpu",
            Self::Vgpu => "vgpu",
            Self::VgpuHostManager => "vgpu-host-manager",
        }
    }
}

/// Package repository configuration of the driver container.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NvidiaDriverRepoConfig {
    /// Name of a ConfigMap in the operator's namespace with repository files (apt sources, yum
    /// repos, zypper repos), mounted where the node's OS expects them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// vGPU guest licensing of the driver.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NvidiaDriverLicensingConfig {
    /// Name of a Secret in the operator's namespace with `gridd.conf` and, for the NVIDIA
    /// License System, the client configuration token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_name: Option<String>,
    /// Deprecated, use `secretName`: a ConfigMap with `gridd.conf` (and the client token).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// License through the NVIDIA License System (mounts the client token). Defaults to false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nls_enabled: Option<bool>,
}

/// Virtual topology daemon configuration of vGPU guests.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NvidiaDriverVirtualTopologyConfig {
    /// Name of a ConfigMap in the operator's namespace with the topology daemon's configuration
    /// file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_type_reads_and_writes_nvidias_values() {
        for (value, text) in [
            (DriverType::Gpu, "gpu"),
            (DriverType::Vgpu, "vgpu"),
            (DriverType::VgpuHostManager, "vgpu-host-manager"),
        ] {
            assert_eq!(serde_json::to_value(value).unwrap(), text);
            assert_eq!(value.as_str(), text);
            let read: DriverType = serde_json::from_value(text.into()).unwrap();
            assert_eq!(read, value);
        }
        assert!(serde_json::from_value::<DriverType>("vGPU".into()).is_err());
    }
}
