//! Host and cluster settings: `spec.hostPaths`, `spec.psa`, `spec.psp`, and the driver add-ons
//! `spec.gds` and `spec.gdrcopy`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{EnvVar, ImageSpec};

/// Paths on the host that the operands mount.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::cel::host_paths)]
pub struct HostPathsSpec {
    /// The host's root filesystem as the operands see it. Unset means `/`.
    #[serde(rename = "rootFS", skip_serializing_if = "Option::is_none")]
    pub root_fs: Option<String>,
    /// Where the driver container exposes the installed driver on the host. Unset means
    /// `/run/nvidia/driver`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver_install_dir: Option<String>,
    /// The kubelet's root directory, for the device plugin and pod-resources sockets. Defaults
    /// to `/var/lib/kubelet`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = HostPathsSpec::DEFAULT_KUBELET_ROOT_DIR))]
    pub kubelet_root_dir: Option<String>,
}

impl HostPathsSpec {
    /// The host's root filesystem when `rootFS` is unset or empty.
    pub const DEFAULT_ROOT_FS: &'static str = "/";
    /// The host directory of a containerized driver when `driverInstallDir` is unset or empty.
    pub const DEFAULT_DRIVER_INSTALL_DIR: &'static str = "/run/nvidia/driver";
    /// The kubelet's root directory when `kubeletRootDir` is unset or empty.
    pub const DEFAULT_KUBELET_ROOT_DIR: &'static str = "/var/lib/kubelet";
}

/// Pod Security Admission.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PsaSpec {
    /// Label the operator's namespace `pod-security.kubernetes.io/{enforce,audit,warn}=privileged`
    /// so the privileged operand pods are admitted. Defaults to false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

/// Deprecated PodSecurityPolicy settings; ignored.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PspSpec {
    /// Deprecated and ignored: PodSecurityPolicy was removed from Kubernetes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

/// GPUDirect Storage.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::cel::disabled_by_default)]
pub struct GdsSpec {
    /// Run the `nvidia-fs` sidecar in the driver pod. Defaults to false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Image of the `nvidia-fs` sidecar.
    #[serde(flatten)]
    pub image: ImageSpec,
    /// Arguments of the sidecar container.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    /// Environment variables of the sidecar container.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<EnvVar>>,
}

/// GDRCopy.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::cel::disabled_by_default)]
pub struct GdrCopySpec {
    /// Run the `gdrdrv` sidecar in the driver pod. Defaults to false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Image of the `gdrdrv` sidecar.
    #[serde(flatten)]
    pub image: ImageSpec,
    /// Arguments of the sidecar container.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    /// Environment variables of the sidecar container.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<EnvVar>>,
}
