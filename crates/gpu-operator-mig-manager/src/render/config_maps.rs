//! The MIG manager's ConfigMaps: its entrypoint, and — unless the ClusterPolicy names the user's
//! own — `default-mig-parted-config` (the default MIG layouts, key `config.yaml`) and
//! `default-gpu-clients` (the host services to stop during a MIG change, key `clients.yaml`).

use std::collections::BTreeMap;

use gpu_operator_core::{build::meta, contract::Operand as _};
use k8s_openapi::{api::core::v1::ConfigMap, apimachinery::pkg::apis::meta::v1::ObjectMeta};

use crate::{DEFAULT_CONFIG, DEFAULT_GPU_CLIENTS, ENTRYPOINT, Input, MigManager, NAME, profiles};

/// Host systemd services that use the GPUs and are stopped while the MIG mode changes.
const HOST_GPU_CLIENTS: [&str; 9] = [
    "nvsm.service",
    "nvsm-mqtt.service",
    "nvsm-core.service",
    "nvsm-api-gateway.service",
    "nvsm-notifier.service",
    "nv_peer_mem.service",
    "nvidia-dcgm.service",
    "dcgm.service",
    "dcgm-exporter.service",
];

/// The container's entrypoint: wait for the validated driver, learn from the validator whether
/// the driver is the host's (only then are host GPU services stopped), start the MIG manager.
const ENTRYPOINT_SCRIPT: &str = r#"#!/bin/sh
# Written by the GPU operator.
ready=/run/nvidia/validations/driver-ready
until [ -f "$ready" ]; do
  echo "nvidia-mig-manager: waiting for the driver to be validated ($ready)"
  sleep 5
done
set -a
. "$ready"
set +a
# Host services that use the GPUs are stopped during a MIG change only with a host driver.
export WITH_SHUTDOWN_HOST_GPU_CLIENTS="$IS_HOST_DRIVER"
echo "nvidia-mig-manager: WITH_SHUTDOWN_HOST_GPU_CLIENTS=$WITH_SHUTDOWN_HOST_GPU_CLIENTS"
exec nvidia-mig-manager
"#;

fn config_map(name: &str, key: &str, value: String) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(meta::labels(NAME, MigManager::NAME)),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(key.to_owned(), value)])),
        ..ConfigMap::default()
    }
}

fn gpu_clients() -> String {
    let mut yaml = String::from("version: v1\nsystemd-services:\n");
    for service in HOST_GPU_CLIENTS {
        yaml.push_str("  - ");
        yaml.push_str(service);
        yaml.push('\n');
    }
    yaml
}

/// The ConfigMaps.
pub fn build(input: &Input) -> Vec<ConfigMap> {
    let mut maps = vec![config_map(
        ENTRYPOINT,
        "entrypoint.sh",
        ENTRYPOINT_SCRIPT.to_owned(),
    )];
    if let Some(custom) = &input.custom {
        maps.push(custom.config_map.clone());
    } else {
        // The generated layouts serialize without fail; an empty map would say so in the pod.
        let layouts = profiles::default_config().unwrap_or_default();
        maps.push(config_map(DEFAULT_CONFIG, "config.yaml", layouts));
    }
    if input.custom_gpu_clients.is_none() {
        maps.push(config_map(
            DEFAULT_GPU_CLIENTS,
            "clients.yaml",
            gpu_clients(),
        ));
    }
    maps
}

#[cfg(test)]
mod tests {
    use gpu_operator_api::{
        ClusterPolicySpec,
        spec::{MigGpuClientsConfigSpec, MigManagerSpec, MigPartedConfigSpec},
    };

    use super::*;
    use crate::CUSTOM_CONFIG;

    #[allow(clippy::needless_pass_by_value)] // callers build the spec inline
    fn names(spec: ClusterPolicySpec) -> Vec<String> {
        let input = crate::validate::for_tests(&spec);
        build(&input)
            .into_iter()
            .map(|c| c.metadata.name.unwrap())
            .collect()
    }

    #[test]
    fn the_defaults_are_rendered_unless_the_user_names_their_own() {
        assert_eq!(
            names(ClusterPolicySpec::default()),
            [ENTRYPOINT, DEFAULT_CONFIG, DEFAULT_GPU_CLIENTS]
        );
        let custom = ClusterPolicySpec {
            mig_manager: Some(MigManagerSpec {
                config: Some(MigPartedConfigSpec {
                    name: Some("mine".into()),
                    default: None,
                }),
                gpu_clients_config: Some(MigGpuClientsConfigSpec {
                    name: Some("clients".into()),
                }),
                ..MigManagerSpec::default()
            }),
            ..ClusterPolicySpec::default()
        };
        assert_eq!(names(custom), [ENTRYPOINT, CUSTOM_CONFIG]);
    }

    #[test]
    fn the_gpu_clients_list_is_yaml_with_the_host_services() {
        let value: serde_yaml::Value = serde_yaml::from_str(&gpu_clients()).unwrap();
        assert_eq!(value["version"], "v1");
        assert_eq!(value["systemd-services"].as_sequence().unwrap().len(), 9);
    }
}
