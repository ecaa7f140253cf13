//! `spec.driver`: the NVIDIA driver container and its options.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{ContainerSpec, EnvVar, ImageSpec};
use super::upgrade::DriverUpgradePolicySpec;

/// The NVIDIA driver container.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::cel::driver)]
pub struct DriverSpec {
    /// Deploy the driver container. Defaults to true; set false when the driver is installed on
    /// the hosts (the validator then uses the host's driver).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Manage drivers through NVIDIADriver objects instead of this section. Defaults to false.
    #[serde(rename = "useNvidiaDriverCRD", skip_serializing_if = "Option::is_none")]
    pub use_nvidia_driver_crd: Option<bool>,
    /// Use precompiled driver images, one per kernel version, instead of compiling the driver on
    /// the node. Defaults to false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub use_precompiled: Option<bool>,
    /// Deprecated, use `kernelModuleType: open` instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub use_open_kernel_modules: Option<bool>,
    /// Which kernel modules to load: `auto` (the default: the driver picks what suits the GPUs),
    /// `open` (the open-source modules) or `proprietary`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "auto"))]
    pub kernel_module_type: Option<KernelModuleType>,
    /// Image of the driver container. The node's OS (such as `ubuntu22.04`) is appended to the
    /// tag unless `version` is a digest.
    #[serde(flatten)]
    pub image: ImageSpec,
    /// Options of the driver container.
    #[serde(flatten)]
    pub container: ContainerSpec,
    /// Run the driver pods in the node's network namespace. Defaults to false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_network: Option<bool>,
    /// Startup probe of the driver container; the driver may take minutes to compile and load.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub startup_probe: Option<ContainerProbeSpec>,
    /// Liveness probe of the driver container.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub liveness_probe: Option<ContainerProbeSpec>,
    /// Readiness probe of the driver container.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub readiness_probe: Option<ContainerProbeSpec>,
    /// GPUDirect RDMA: load `nvidia-peermem` so network adapters can access GPU memory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rdma: Option<GpuDirectRdmaSpec>,
    /// How driver upgrades roll through the nodes (cordon, drain, restart, validate).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upgrade_policy: Option<DriverUpgradePolicySpec>,
    /// The k8s-driver-manager init container, which prepares a node before the driver starts
    /// (evicting GPU pods, unloading an old driver).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub manager: Option<DriverManagerSpec>,
    /// Package repository configuration for compiling the driver behind a proxy or mirror.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repo_config: Option<DriverRepoConfigSpec>,
    /// Custom CA certificates for reaching the package repositories.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cert_config: Option<DriverCertConfigSpec>,
    /// vGPU guest licensing (NVIDIA License System or legacy license server).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub licensing_config: Option<DriverLicensingConfigSpec>,
    /// Virtual topology daemon configuration for vGPU guests.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub virtual_topology: Option<VirtualTopologyConfigSpec>,
    /// Custom kernel module parameters for the driver.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_module_config: Option<KernelModuleConfigSpec>,
    /// Name of a Secret in the operator's namespace whose keys are set as environment variables
    /// of the driver container.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_env: Option<String>,
}

/// Which NVIDIA kernel modules the driver container loads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum KernelModuleType {
    /// Let the driver choose the modules that suit the GPUs.
    #[default]
    Auto,
    /// The open-source kernel modules.
    Open,
    /// The proprietary kernel modules.
    Proprietary,
}

/// Probe settings of a container.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerProbeSpec {
    /// Seconds after the container starts before the first probe.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initial_delay_seconds: Option<i32>,
    /// Seconds before a probe times out. At least 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub timeout_seconds: Option<i32>,
    /// Seconds between probes. At least 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub period_seconds: Option<i32>,
    /// Consecutive successes needed after a failure to count as passing. At least 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub success_threshold: Option<i32>,
    /// Consecutive failures before the probe counts as failed. At least 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub failure_threshold: Option<i32>,
}

/// GPUDirect RDMA settings.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GpuDirectRdmaSpec {
    /// Load the `nvidia-peermem` module. Defaults to false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Use the MOFED driver installed on the host instead of the network operator's. Defaults to
    /// false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub use_host_mofed: Option<bool>,
}

/// The k8s-driver-manager init container of the driver (or vGPU/VFIO manager) pod.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DriverManagerSpec {
    /// Image of the driver manager.
    #[serde(flatten)]
    pub image: ImageSpec,
    /// Environment variables of the driver manager, such as `ENABLE_GPU_POD_EVICTION` or
    /// `DRAIN_USE_FORCE`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<EnvVar>>,
}

/// Package repository configuration of the driver container.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DriverRepoConfigSpec {
    /// Name of a ConfigMap in the operator's namespace with repository files (apt sources, yum
    /// repos, zypper repos) mounted where the node's OS expects them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_map_name: Option<String>,
}

/// Custom CA certificates of the driver container.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DriverCertConfigSpec {
    /// Name of a ConfigMap in the operator's namespace with the CA certificates.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// vGPU guest licensing of the driver.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DriverLicensingConfigSpec {
    /// Deprecated, use `secretName`: a ConfigMap with `gridd.conf` (and the client token).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_map_name: Option<String>,
    /// Name of a Secret in the operator's namespace with `gridd.conf` and, for NLS, the client
    /// configuration token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_name: Option<String>,
    /// License through the NVIDIA License System (mounts the client token). Defaults to false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nls_enabled: Option<bool>,
}

/// Virtual topology configuration of the driver.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualTopologyConfigSpec {
    /// Name of a ConfigMap in the operator's namespace with the topology daemon's configuration.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
}

/// Kernel module parameters of the driver.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KernelModuleConfigSpec {
    /// Name of a ConfigMap in the operator's namespace with one key per module (such as
    /// `nvidia.conf`) holding its parameters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}
