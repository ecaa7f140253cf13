//! `spec.devicePlugin` and `spec.gfd`: advertising GPUs to Kubernetes and labelling nodes.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{ContainerSpec, ImageSpec};

/// The NVIDIA device plugin (and the MPS control daemon that runs with it).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::cel::enabled_by_default)]
pub struct DevicePluginSpec {
    /// Deploy the device plugin, which makes `nvidia.com/gpu` (or MIG) resources schedulable.
    /// Defaults to true.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Image of the device plugin; also used by GPU Feature Discovery's config manager.
    #[serde(flatten)]
    pub image: ImageSpec,
    /// Options of the device plugin container.
    #[serde(flatten)]
    pub container: ContainerSpec,
    /// Run the device plugin pods in the node's network namespace. Defaults to false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_network: Option<bool>,
    /// Device plugin configurations (time-slicing, MPS, ...) kept in a ConfigMap and chosen per
    /// node: each key of the ConfigMap is one configuration (device plugin config format `v1`);
    /// a node uses the key named by its `nvidia.com/device-plugin.config` label, else `default`,
    /// else the plugin's built-in settings. Relabelling a node switches its configuration
    /// without restarting pods.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<DevicePluginConfig>,
    /// The MPS control daemon, started on nodes whose configuration shares GPUs with MPS.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mps: Option<MpsConfig>,
}

/// Where the device plugin's configurations come from: a ConfigMap with one configuration per
/// key, selected per node by the `nvidia.com/device-plugin.config` label.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::cel::device_plugin_config)]
pub struct DevicePluginConfig {
    /// Name of the ConfigMap, in the operator's namespace, that holds the configurations (for
    /// example `time-slicing-config`). Setting it adds the config-manager containers to the
    /// device plugin and GPU Feature Discovery pods.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Key of the ConfigMap used on nodes without the `nvidia.com/device-plugin.config` label
    /// (for example `any`). Requires `name`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
}

/// MPS (Multi-Process Service) settings.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::cel::mps)]
pub struct MpsConfig {
    /// Directory on the host for the MPS control daemon's pipes and logs. Defaults to
    /// `/run/nvidia/mps`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = MpsConfig::DEFAULT_ROOT))]
    pub root: Option<String>,
}

impl MpsConfig {
    /// The host directory of the MPS control daemon when `root` is unset or empty.
    pub const DEFAULT_ROOT: &'static str = "/run/nvidia/mps";
}

impl DevicePluginSpec {
    /// `mps.root`, or [`MpsConfig::DEFAULT_ROOT`] when it is unset or empty.
    #[must_use]
    pub fn mps_root(&self) -> &str {
        self.mps
            .as_ref()
            .and_then(|m| m.root.as_deref())
            .filter(|root| !root.is_empty())
            .unwrap_or(MpsConfig::DEFAULT_ROOT)
    }
}

/// GPU Feature Discovery.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::cel::enabled_by_default)]
pub struct GfdSpec {
    /// Deploy GPU Feature Discovery, which labels nodes with `nvidia.com/gpu.product`,
    /// `nvidia.com/gpu.memory`, `nvidia.com/mig.capable` and more. Defaults to true.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Image of GPU Feature Discovery (NVIDIA ships it in the device plugin image).
    #[serde(flatten)]
    pub image: ImageSpec,
    /// Options of the GPU Feature Discovery container, for example env `GFD_SLEEP_INTERVAL`.
    #[serde(flatten)]
    pub container: ContainerSpec,
    /// Run the GPU Feature Discovery pods in the node's network namespace. Defaults to false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_network: Option<bool>,
}
