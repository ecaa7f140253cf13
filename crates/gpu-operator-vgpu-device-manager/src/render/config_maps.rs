//! The vGPU device manager's configurations: `default-vgpu-devices-config` (the default vGPU
//! device configurations, key `config.yaml`), or — when the ClusterPolicy names the user's
//! ConfigMap, which NVIDIA mounts instead of rendering the default — the operator's checked copy
//! of it.

use std::collections::BTreeMap;

use gpu_operator_core::{build::meta, contract::Operand as _};
use k8s_openapi::{api::core::v1::ConfigMap, apimachinery::pkg::apis::meta::v1::ObjectMeta};

use crate::{DEFAULT_CONFIG, Input, NAME, VgpuDeviceManager, catalog, validate::CONFIG_KEY};

/// The ConfigMap the pods mount.
pub fn build(input: &Input) -> ConfigMap {
    let labels = Some(meta::labels(NAME, VgpuDeviceManager::NAME));
    if let Some(custom) = &input.custom {
        let mut copy = custom.config_map.clone();
        copy.metadata.labels = labels;
        return copy;
    }
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(DEFAULT_CONFIG.to_owned()),
            labels,
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(
            CONFIG_KEY.to_owned(),
            catalog::default_config().to_owned(),
        )])),
        ..ConfigMap::default()
    }
}
