//! Virtual-machine workloads: `spec.sandboxWorkloads` and the components it deploys (VFIO
//! manager, vGPU managers, sandbox device plugins, Kata and confidential-computing managers).
//! All kept in the API so no field is lost. This operator deploys the VFIO manager, the vGPU
//! device manager, the sandbox device plugins and the sandbox validator (which `spec.validator`
//! configures); the vGPU manager and the Kata and confidential-computing managers are accepted but
//! not deployed (`gpu-operator-sandbox` reports them).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{ContainerSpec, ImageSpec};
use super::driver::{DriverManagerSpec, KernelModuleConfigSpec};

/// Virtual-machine workloads on GPU nodes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SandboxWorkloadsSpec {
    /// Honour the `nvidia.com/gpu.workload.config` node label, so nodes can run VM workloads
    /// instead of containers. Defaults to false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Workload of nodes without a valid `nvidia.com/gpu.workload.config` label: `container`
    /// (the default), `vm-passthrough` (whole GPUs passed to VMs) or `vm-vgpu` (vGPUs for VMs).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "container"))]
    pub default_workload: Option<WorkloadConfig>,
    /// VM technology: `kubevirt` (the default) or `kata`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "kubevirt"))]
    pub mode: Option<SandboxMode>,
}

/// What a GPU node runs.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub enum WorkloadConfig {
    /// Containers using GPUs.
    #[default]
    #[serde(rename = "container")]
    Container,
    /// Virtual machines with whole GPUs passed through.
    #[serde(rename = "vm-passthrough")]
    VmPassthrough,
    /// Virtual machines with vGPUs.
    #[serde(rename = "vm-vgpu")]
    VmVgpu,
}

impl WorkloadConfig {
    /// Its name in the `nvidia.com/gpu.workload.config` label and NVIDIA's `workload-type` file.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Container => "container",
            Self::VmPassthrough => "vm-passthrough",
            Self::VmVgpu => "vm-vgpu",
        }
    }

    /// The workload config named `name`; `None` for another name.
    pub fn from_name(name: &str) -> Option<Self> {
        [Self::Container, Self::VmPassthrough, Self::VmVgpu]
            .into_iter()
            .find(|config| config.as_str() == name)
    }
}

/// VM technology of sandbox workloads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SandboxMode {
    /// KubeVirt virtual machines.
    #[default]
    Kubevirt,
    /// Kata containers.
    Kata,
}

/// The VFIO manager.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::cel::sandbox_driver)]
pub struct VfioManagerSpec {
    /// Deploy the VFIO manager on `vm-passthrough` nodes (only with sandbox workloads). Defaults
    /// to false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Image of the VFIO manager.
    #[serde(flatten)]
    pub image: ImageSpec,
    /// Options of the VFIO manager container.
    #[serde(flatten)]
    pub container: ContainerSpec,
    /// Run the VFIO manager pods in the node's network namespace. Defaults to false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_network: Option<bool>,
    /// The driver manager init container, which unloads the NVIDIA driver first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver_manager: Option<DriverManagerSpec>,
}

/// The KubeVirt GPU device plugin.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::cel::disabled_by_default)]
pub struct SandboxDevicePluginSpec {
    /// Deploy the KubeVirt GPU device plugin on VM nodes (only with sandbox workloads in
    /// `kubevirt` mode). Defaults to false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Image of the KubeVirt GPU device plugin.
    #[serde(flatten)]
    pub image: ImageSpec,
    /// Options of the plugin container.
    #[serde(flatten)]
    pub container: ContainerSpec,
    /// Run the plugin pods in the node's network namespace. Defaults to false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_network: Option<bool>,
}

/// The vGPU manager (vGPU host driver).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::cel::sandbox_driver)]
pub struct VgpuManagerSpec {
    /// Deploy the vGPU host driver on `vm-vgpu` nodes (only with sandbox workloads). Defaults to
    /// false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Image of the vGPU manager (built by you from NVIDIA's vGPU host driver).
    #[serde(flatten)]
    pub image: ImageSpec,
    /// Options of the vGPU manager container.
    #[serde(flatten)]
    pub container: ContainerSpec,
    /// Run the vGPU manager pods in the node's network namespace. Defaults to false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_network: Option<bool>,
    /// The driver manager init container, which unloads a previous driver first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver_manager: Option<DriverManagerSpec>,
    /// Custom kernel module parameters of the vGPU host driver.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_module_config: Option<KernelModuleConfigSpec>,
}

/// The vGPU device manager.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::cel::disabled_by_default)]
pub struct VgpuDeviceManagerSpec {
    /// Deploy the vGPU device manager on `vm-vgpu` nodes (only with sandbox workloads). Defaults
    /// to false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Image of the vGPU device manager.
    #[serde(flatten)]
    pub image: ImageSpec,
    /// Options of the vGPU device manager container.
    #[serde(flatten)]
    pub container: ContainerSpec,
    /// Run the vGPU device manager pods in the node's network namespace. Defaults to false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_network: Option<bool>,
    /// The vGPU layouts the manager can create.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<VgpuDevicesConfigSpec>,
}

/// vGPU layouts of the vGPU device manager.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VgpuDevicesConfigSpec {
    /// Name of a ConfigMap in the operator's namespace with the vGPU layouts; unset uses
    /// `default-vgpu-devices-config`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Layout used on nodes without the `nvidia.com/vgpu.config` label. Defaults to `default`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = VgpuDevicesConfigSpec::DEFAULT_CONFIG))]
    pub default: Option<String>,
}

impl VgpuDevicesConfigSpec {
    /// The vGPU device configuration applied to nodes without the `nvidia.com/vgpu.config` label
    /// when `default` is unset or empty (NVIDIA's `VgpuDMDefaultConfigName`).
    pub const DEFAULT_CONFIG: &'static str = "default";
}

impl VgpuDeviceManagerSpec {
    /// `config.default`, or [`VgpuDevicesConfigSpec::DEFAULT_CONFIG`] when unset or empty (as
    /// NVIDIA's operator sets `DEFAULT_VGPU_CONFIG`).
    #[must_use]
    pub fn default_config(&self) -> &str {
        self.config
            .as_ref()
            .and_then(|c| c.default.as_deref())
            .filter(|d| !d.is_empty())
            .unwrap_or(VgpuDevicesConfigSpec::DEFAULT_CONFIG)
    }

    /// `config.name` when it names a ConfigMap of the user's: set, not empty, and not the
    /// default ConfigMap's name `default_name` (NVIDIA's `GetConfigMapName` rule).
    #[must_use]
    pub fn custom_config<'a>(&'a self, default_name: &str) -> Option<&'a str> {
        self.config
            .as_ref()
            .and_then(|c| c.name.as_deref())
            .filter(|n| !n.is_empty() && *n != default_name)
    }
}

/// The Kata manager; deprecated, never deployed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::cel::disabled_by_default)]
pub struct KataManagerSpec {
    /// Deprecated and ignored: the Kata manager is no longer deployed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Image of the Kata manager.
    #[serde(flatten)]
    pub image: ImageSpec,
    /// Options of the Kata manager container.
    #[serde(flatten)]
    pub container: ContainerSpec,
    /// Run the Kata manager pods in the node's network namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_network: Option<bool>,
    /// Kata runtime classes and where their artifacts come from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<KataManagerConfig>,
}

/// Configuration of the Kata manager.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KataManagerConfig {
    /// Host directory where runtime class artifacts are stored. Defaults to
    /// `/opt/nvidia-gpu-operator/artifacts/runtimeclasses`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "/opt/nvidia-gpu-operator/artifacts/runtimeclasses"))]
    pub artifacts_dir: Option<String>,
    /// Kata runtime classes to create.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime_classes: Option<Vec<KataRuntimeClass>>,
}

/// One Kata runtime class.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KataRuntimeClass {
    /// Name of the RuntimeClass.
    pub name: String,
    /// Node selector of the RuntimeClass's scheduling.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,
    /// Where the runtime class's artifacts are pulled from.
    pub artifacts: KataArtifacts,
}

/// Artifacts of a Kata runtime class.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KataArtifacts {
    /// OCI reference of the artifacts.
    pub url: String,
    /// Name of a Secret with credentials for pulling the artifacts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pull_secret: Option<String>,
}

/// The Kata sandbox device plugin.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::cel::disabled_by_default)]
pub struct KataSandboxDevicePluginSpec {
    /// Deploy the Kata sandbox device plugin on VM nodes (only with sandbox workloads in `kata`
    /// mode). Defaults to false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Image of the Kata sandbox device plugin.
    #[serde(flatten)]
    pub image: ImageSpec,
    /// Options of the plugin container.
    #[serde(flatten)]
    pub container: ContainerSpec,
    /// Run the plugin pods in the node's network namespace. Defaults to false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_network: Option<bool>,
}

/// The confidential-computing manager.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::cel::disabled_by_default)]
pub struct CcManagerSpec {
    /// Deploy the CC manager on VM nodes (only with sandbox workloads in `kata` mode). Defaults
    /// to false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Image of the CC manager.
    #[serde(flatten)]
    pub image: ImageSpec,
    /// Options of the CC manager container.
    #[serde(flatten)]
    pub container: ContainerSpec,
    /// Run the CC manager pods in the node's network namespace. Defaults to false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_network: Option<bool>,
    /// Confidential-computing mode of nodes without the `nvidia.com/cc.mode` label: `on`, `off`
    /// or `devtools`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_mode: Option<CcMode>,
}

/// Confidential-computing mode of a GPU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CcMode {
    /// Confidential computing on.
    On,
    /// Confidential computing off.
    #[default]
    Off,
    /// Confidential computing with developer tools.
    Devtools,
}
