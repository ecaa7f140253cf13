//! Checks the ClusterPolicy for the vGPU device manager: resolves its image (`vgpuDeviceManager`,
//! else `VGPU_DEVICE_MANAGER_IMAGE`) and the validator's (its barrier), the configuration applied
//! to unlabelled nodes (`vgpuDeviceManager.config.default`), and checks the user's configuration
//! ConfigMap (`vgpuDeviceManager.config.name`) into the copy the pods mount. Pure.

use gpu_operator_api::ClusterPolicySpec;
use gpu_operator_core::{
    Error,
    build::{
        component::Component,
        shared::Shared,
        user_config::{self, Checked, Source},
    },
    contract::{Cluster, Warning},
};

use crate::{CUSTOM_CONFIG, DEFAULT_CONFIG, catalog, config};

/// The operator's fallback variable of the vGPU device manager image.
pub const IMAGE_ENV: &str = "VGPU_DEVICE_MANAGER_IMAGE";
/// The key of a configuration ConfigMap the manager reads (its `CONFIG_FILE`).
pub const CONFIG_KEY: &str = "config.yaml";

/// What rendering the vGPU device manager needs.
#[derive(Clone, Debug)]
pub struct Input {
    /// The vGPU device manager image.
    pub image: String,
    /// The validator image, which runs the `vgpu-manager-validation` barrier.
    pub validator_image: String,
    /// The configuration applied to nodes without the `nvidia.com/vgpu.config` label
    /// (`DEFAULT_VGPU_CONFIG`).
    pub default_config: String,
    /// The checked copy of the user's configuration ConfigMap, if one is named.
    pub custom: Option<Checked>,
    /// The user's ConfigMap's name, if any (for messages).
    pub custom_name: Option<String>,
    /// The operator namespace (the bindings' subject).
    pub namespace: String,
    /// `spec.vgpuDeviceManager`'s container settings.
    pub component: Component,
    /// The settings every operand pod shares.
    pub shared: Shared,
}

/// `Ok(None)` unless sandbox workloads and `vgpuDeviceManager.enabled` are both on (both default
/// to false); an image that cannot be resolved, or a user's ConfigMap that fails its checks, is
/// an error naming the field (the DaemonSet then keeps its last good configuration).
pub fn validate(spec: &ClusterPolicySpec, cluster: &Cluster<'_>) -> Result<Option<Input>, Error> {
    let Some(section) = spec
        .vgpu_device_manager
        .as_ref()
        .filter(|_| spec.vgpu_device_manager_enabled())
    else {
        return Ok(None);
    };
    let image = cluster.image("vgpuDeviceManager", &section.image, IMAGE_ENV)?;
    let validator_image = cluster.validator_image(spec)?;
    let default_config = section.default_config().to_owned();
    let custom_name = section.custom_config(DEFAULT_CONFIG).map(str::to_owned);
    let custom = match &custom_name {
        Some(name) => Some(check_custom(cluster, name, &default_config)?),
        None => None,
    };
    Ok(Some(Input {
        image,
        validator_image,
        default_config,
        custom,
        custom_name,
        namespace: cluster.namespace.to_owned(),
        component: Component::of(&section.image, &section.container, section.host_network),
        shared: Shared::of(spec),
    }))
}

/// The user's ConfigMap checked by the vGPU device manager's rules: its `config.yaml` must be a
/// vGPU device configuration with known vGPU types and the configuration `default` names (other
/// keys are not read by the manager).
fn check_custom(cluster: &Cluster<'_>, name: &str, default: &str) -> Result<Checked, Error> {
    let source = Source {
        field: "vgpuDeviceManager.config.name",
        name,
        required_key: Some((
            CONFIG_KEY,
            "the vGPU device manager reads its configurations from that key: put the vGPU \
             device configuration there",
        )),
    };
    let check = |key: &str, text: &str| {
        if key != CONFIG_KEY {
            return Ok(Vec::new());
        }
        let names = config::configs(text)?;
        if names.iter().any(|n| n == default) {
            return Ok(Vec::new());
        }
        Err(format!(
            "vgpu-configs has no configuration {default:?}, which vgpuDeviceManager.config.default \
             names for nodes without the nvidia.com/vgpu.config label: add it, or set \
             vgpuDeviceManager.config.default to one of {}",
            names.join(", ")
        ))
    };
    user_config::check(
        cluster.namespace,
        cluster.config_maps,
        source,
        CUSTOM_CONFIG,
        &check,
    )
}

/// With the default configurations: `vgpuDeviceManager.config.default` naming none of them, so
/// every node without the `nvidia.com/vgpu.config` label fails to get vGPU devices. (With the
/// user's ConfigMap that is a failed check instead, in [`validate`].)
pub fn warnings(input: &Input) -> Vec<Warning> {
    let default = input.default_config.as_str();
    if input.custom.is_some() || catalog::default_config_names().any(|n| n == default) {
        return Vec::new();
    }
    vec![Warning {
        reason: "VGPUConfigNotFound",
        message: format!(
            "vgpuDeviceManager.config.default is {default:?}, which is not a configuration of \
             ConfigMap {DEFAULT_CONFIG} (default, or a vGPU type such as A10-24Q), so nodes \
             without the nvidia.com/vgpu.config label get no vGPU devices: set it to one of \
             that ConfigMap's configurations, or set vgpuDeviceManager.config.name to a \
             ConfigMap whose {CONFIG_KEY} defines {default:?}"
        ),
    }]
}

#[cfg(test)]
pub mod tests;
