//! The sections of `ClusterPolicy.spec`, one module per group of components.

mod alerting;
mod common;
mod dcgm;
mod device_plugin;
mod driver;
mod mig;
mod monitoring;
mod operator;
mod platform;
mod sandbox;
mod toolkit;
mod upgrade;
mod validator;

pub use alerting::{AlertThresholds, GrafanaDashboardsConfig, PrometheusRuleConfig};
pub use common::{ContainerSpec, EnvVar, ImageSpec, ResourceRequirements};
pub use dcgm::{
    DcgmExporterConfig, DcgmExporterServiceConfig, DcgmExporterSpec, DcgmSpec, HpcJobMappingConfig,
};
pub use device_plugin::{DevicePluginConfig, DevicePluginSpec, GfdSpec, MpsConfig};
pub use driver::{
    ContainerProbeSpec, DriverCertConfigSpec, DriverLicensingConfigSpec, DriverManagerSpec,
    DriverRepoConfigSpec, DriverSpec, GpuDirectRdmaSpec, KernelModuleConfigSpec, KernelModuleType,
    VirtualTopologyConfigSpec,
};
pub use mig::{
    MigGpuClientsConfigSpec, MigManagerSpec, MigPartedConfigSpec, MigRecovery, MigSpec,
    MigStrategy, MigWatchdogSpec,
};
pub use monitoring::{RelabelConfig, ServiceMonitorConfig};
pub use operator::{
    DaemonsetsSpec, InitContainerSpec, OperatorMetricsSpec, OperatorSpec, RollingUpdateSpec,
    UpdateStrategy,
};
pub use platform::{GdrCopySpec, GdsSpec, HostPathsSpec, PsaSpec, PspSpec};
pub use sandbox::{
    CcManagerSpec, CcMode, KataArtifacts, KataManagerConfig, KataManagerSpec, KataRuntimeClass,
    KataSandboxDevicePluginSpec, SandboxDevicePluginSpec, SandboxMode, SandboxWorkloadsSpec,
    VfioManagerSpec, VgpuDeviceManagerSpec, VgpuDevicesConfigSpec, VgpuManagerSpec, WorkloadConfig,
};
pub use toolkit::{CdiSpec, ToolkitSpec};
pub use upgrade::{DrainSpec, DriverUpgradePolicySpec, PodDeletionSpec, WaitForCompletionSpec};
pub use validator::{HealthSpec, NodeStatusExporterSpec, ValidatorComponentSpec, ValidatorSpec};
