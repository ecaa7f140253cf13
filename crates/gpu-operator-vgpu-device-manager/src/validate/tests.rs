//! Tests of the vGPU device manager's validation: when it is deployed, its images, the default
//! configuration, and the user's ConfigMap checked into the copy (or refused, naming the
//! ConfigMap, the key and the field).

use std::sync::Arc;

use gpu_operator_api::spec::{SandboxWorkloadsSpec, VgpuDeviceManagerSpec};
use gpu_operator_core::cache::facts::ClusterFacts;
use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::json;

use super::*;

/// A user's configuration in NVIDIA's style, with a `default` and a `custom` configuration.
pub const MINE: &str = "version: v1\nvgpu-configs:\n  default:\n    - devices: all\n      \
                        vgpu-devices:\n        A10-12Q: 2\n  custom:\n    - devices: all\n      \
                        vgpu-devices:\n        A10-4C: 6\n";

/// `spec` with sandbox workloads `sandbox` and section `vgpuDeviceManager`.
pub fn spec(sandbox: Option<bool>, section: serde_json::Value) -> ClusterPolicySpec {
    ClusterPolicySpec {
        sandbox_workloads: Some(SandboxWorkloadsSpec {
            enabled: sandbox,
            ..SandboxWorkloadsSpec::default()
        }),
        vgpu_device_manager: Some(
            serde_json::from_value::<VgpuDeviceManagerSpec>(section).unwrap(),
        ),
        ..ClusterPolicySpec::default()
    }
}

/// Validation with ConfigMap `mine` holding `data` (`None`: no such ConfigMap).
pub fn check(
    spec: &ClusterPolicySpec,
    data: Option<&[(&str, &str)]>,
) -> Result<Option<Input>, Error> {
    let facts = ClusterFacts::default();
    let mine = data.map(|data| ConfigMap {
        data: Some(
            data.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        ),
        ..ConfigMap::default()
    });
    let lookup = move |name: &str| mine.clone().filter(|_| name == "mine").map(Arc::new);
    let cluster = Cluster {
        namespace: "gpu-operator",
        facts: &facts,
        image_env: &gpu_operator_core::fixtures::image_env,
        config_maps: &lookup,
        policy: None,
        server: gpu_operator_core::cache::server_facts::ServerFacts::unknown(),
    };
    validate(spec, &cluster)
}

fn mine(default: Option<&str>) -> ClusterPolicySpec {
    spec(
        Some(true),
        json!({"enabled": true, "config": {"name": "mine", "default": default}}),
    )
}

#[test]
fn deployed_only_with_sandbox_workloads_and_the_section_enabled() {
    // NVIDIA: `sandboxEnabled && vgpuDeviceManager.IsEnabled()`, and an unset `enabled` is false.
    let on = json!({"enabled": true});
    for (sandbox, section, deployed) in [
        (Some(true), on.clone(), true),
        (Some(true), json!({}), false),
        (Some(true), json!({"enabled": false}), false),
        (Some(false), on.clone(), false),
        (None, on.clone(), false),
    ] {
        let input = check(&spec(sandbox, section.clone()), None).unwrap();
        assert_eq!(input.is_some(), deployed, "{sandbox:?} {section}");
    }
    let mut no_section = spec(Some(true), on);
    no_section.vgpu_device_manager = None;
    assert!(check(&no_section, None).unwrap().is_none());
    assert!(
        check(&ClusterPolicySpec::default(), None)
            .unwrap()
            .is_none()
    );
}

#[test]
fn the_default_configurations_serve_without_a_name() {
    for section in [
        json!({"enabled": true}),
        json!({"enabled": true, "config": {"name": "", "default": ""}}),
        // NVIDIA's rule: naming the default ConfigMap is no custom ConfigMap.
        json!({"enabled": true, "config": {"name": DEFAULT_CONFIG}}),
    ] {
        let input = check(&spec(Some(true), section.clone()), None)
            .unwrap()
            .unwrap();
        assert!(input.custom.is_none(), "{section}");
        assert_eq!(input.default_config, "default", "{section}");
        assert!(warnings(&input).is_empty(), "{section}");
    }
    let input = check(&spec(Some(true), json!({"enabled": true})), None)
        .unwrap()
        .unwrap();
    assert_eq!(input.image, "registry.example.com/vgpu-device-manager:v1");
    assert_eq!(input.validator_image, "registry.example.com/validator:v1");
    assert_eq!(input.namespace, "gpu-operator");
}

#[test]
fn a_default_the_default_configurations_lack_is_a_warning() {
    let input = check(
        &spec(
            Some(true),
            json!({"enabled": true, "config": {"default": "A100-4C"}}),
        ),
        None,
    )
    .unwrap()
    .unwrap();
    assert!(warnings(&input).is_empty());
    let input = check(
        &spec(
            Some(true),
            json!({"enabled": true, "config": {"default": "A100-4Q"}}),
        ),
        None,
    )
    .unwrap()
    .unwrap();
    let found = warnings(&input);
    assert_eq!(found[0].reason, "VGPUConfigNotFound");
    assert_eq!(
        found[0].message,
        "vgpuDeviceManager.config.default is \"A100-4Q\", which is not a configuration of \
         ConfigMap default-vgpu-devices-config (default, or a vGPU type such as A10-24Q), so \
         nodes without the nvidia.com/vgpu.config label get no vGPU devices: set it to one of \
         that ConfigMap's configurations, or set vgpuDeviceManager.config.name to a ConfigMap \
         whose config.yaml defines \"A100-4Q\""
    );
}

#[test]
fn a_users_configuration_is_checked_and_copied() {
    let input = check(
        &mine(Some("custom")),
        Some(&[("config.yaml", MINE), ("notes", "x")]),
    )
    .unwrap()
    .unwrap();
    let custom = input.custom.as_ref().unwrap();
    assert_eq!(
        custom.config_map.metadata.name.as_deref(),
        Some(CUSTOM_CONFIG)
    );
    assert_eq!(
        custom.config_map.data.as_ref().unwrap()["config.yaml"],
        MINE
    );
    assert_eq!(input.custom_name.as_deref(), Some("mine"));
    assert_eq!(input.default_config, "custom");
    assert!(warnings(&input).is_empty());
}

#[test]
fn a_bad_users_configuration_is_refused_naming_the_config_map_key_and_field() {
    let prefix = "ConfigMap gpu-operator/mine (named by vgpuDeviceManager.config.name)";
    let refused = format!("{prefix} is not used, the operands keep their last good configuration");
    let error = |spec: &ClusterPolicySpec, data: Option<&[(&str, &str)]>| {
        let error = check(spec, data).unwrap_err();
        assert_eq!(error.category(), "InvalidConfig");
        error.to_string()
    };
    assert!(
        error(&mine(None), None).contains(&format!(
            "{prefix} does not exist: create it in namespace gpu-operator or fix \
             vgpuDeviceManager.config.name"
        )),
        "{}",
        error(&mine(None), None)
    );
    let missing_key = error(&mine(None), Some(&[("vgpu.yaml", MINE)]));
    assert!(
        missing_key.contains(&format!(
            "{refused}: no key \"config.yaml\" (keys: \"vgpu.yaml\"): the vGPU device manager \
             reads its configurations from that key: put the vGPU device configuration there"
        )),
        "{missing_key}"
    );
    let not_yaml = error(&mine(None), Some(&[("config.yaml", "version: [")]));
    assert!(
        not_yaml.contains(&format!("{refused}: key \"config.yaml\": not YAML: ")),
        "{not_yaml}"
    );
    let unknown_type = error(
        &mine(None),
        Some(&[("config.yaml", &MINE.replace("A10-4C", "A10-5C"))]),
    );
    assert!(
        unknown_type.contains(&format!(
            "{refused}: key \"config.yaml\": vgpu-configs.custom[0].vgpu-devices.A10-5C: not a \
             vGPU type of the A10 (its types: A10-1Q, A10-2Q, A10-3Q, A10-4C, A10-4Q, A10-6C, \
             A10-6Q, A10-8C, A10-8Q, A10-12C, A10-12Q, A10-24C, A10-24Q)"
        )),
        "{unknown_type}"
    );
    let absent_default = error(&mine(Some("big")), Some(&[("config.yaml", MINE)]));
    assert!(
        absent_default.ends_with(&format!(
            "{refused}: key \"config.yaml\": vgpu-configs has no configuration \"big\", which \
             vgpuDeviceManager.config.default names for nodes without the \
             nvidia.com/vgpu.config label: add it, or set vgpuDeviceManager.config.default to \
             one of default, custom"
        )),
        "{absent_default}"
    );
}

#[test]
fn an_image_nobody_names_is_an_error_naming_the_section() {
    let nothing = |_: &str| None;
    let enabled = spec(Some(true), json!({"enabled": true}));
    let error =
        gpu_operator_core::fixtures::with_cluster(&nothing, |cluster| validate(&enabled, cluster))
            .unwrap_err()
            .to_string();
    assert!(
        error.contains("vgpuDeviceManager") && error.contains(IMAGE_ENV),
        "{error}"
    );
}
