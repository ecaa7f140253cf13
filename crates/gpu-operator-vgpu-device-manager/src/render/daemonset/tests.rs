//! Tests of the vGPU device manager's DaemonSet and ConfigMap.

use gpu_operator_api::ClusterPolicySpec;
use k8s_openapi::api::core::v1::PodSpec;
use serde_json::json;

use super::*;
use crate::validate::tests::{MINE, check, spec};

fn input(section: serde_json::Value, custom: bool) -> Input {
    let mut section = section;
    section["enabled"] = json!(true);
    let spec: ClusterPolicySpec = spec(Some(true), section);
    let data: &[(&str, &str)] = &[("config.yaml", MINE)];
    check(&spec, custom.then_some(data)).unwrap().unwrap()
}

fn pod(input: &Input) -> PodSpec {
    let ds = build(input);
    assert_eq!(ds.metadata.name.as_deref(), Some(NAME));
    ds.spec.unwrap().template.spec.unwrap()
}

fn env<'a>(container: &'a Container, name: &str) -> Option<&'a str> {
    container
        .env
        .iter()
        .flatten()
        .find(|e| e.name == name)?
        .value
        .as_deref()
}

fn config_map_of(pod: &PodSpec) -> &str {
    let volume = pod
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == "vgpu-config")
        .unwrap();
    &volume.config_map.as_ref().unwrap().name
}

#[test]
fn nvidias_pod_by_default() {
    let pod = pod(&input(json!({}), false));
    assert_eq!(
        pod.node_selector.as_ref().unwrap()["nvidia.com/gpu.deploy.vgpu-device-manager"],
        "true"
    );
    assert_eq!(pod.service_account_name.as_deref(), Some(NAME));
    let init = &pod.init_containers.as_ref().unwrap()[0];
    assert_eq!(init.name, "vgpu-manager-validation");
    assert_eq!(
        init.image.as_deref(),
        Some("registry.example.com/validator:v1")
    );
    let script = &init.args.as_ref().unwrap()[0];
    assert!(
        script.contains("[ -f /run/nvidia/validations/vgpu-manager-ready ] || [ -f /run/nvidia/validations/host-vgpu-manager-ready ]"),
        "{script}"
    );
    assert_eq!(
        init.security_context.as_ref().unwrap().privileged,
        Some(true)
    );
    let main = &pod.containers[0];
    assert_eq!(main.name, NAME);
    assert_eq!(
        main.image.as_deref(),
        Some("registry.example.com/vgpu-device-manager:v1")
    );
    assert_eq!(env(main, "CONFIG_FILE"), Some("/vgpu-config/config.yaml"));
    assert_eq!(env(main, "DEFAULT_VGPU_CONFIG"), Some("default"));
    for field in ["NAMESPACE", "NODE_NAME"] {
        assert!(
            main.env
                .iter()
                .flatten()
                .any(|e| e.name == field && e.value_from.is_some())
        );
    }
    assert_eq!(
        main.security_context.as_ref().unwrap().privileged,
        Some(true)
    );
    assert_eq!(config_map_of(&pod), DEFAULT_CONFIG);
    let mounts: Vec<&str> = main
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| m.mount_path.as_str())
        .collect();
    assert_eq!(mounts, ["/vgpu-config", "/sys", "/host", "/driver-root"]);
}

#[test]
fn a_users_configuration_is_mounted_as_the_operators_copy() {
    let input = input(
        json!({"config": {"name": "mine", "default": "custom"}}),
        true,
    );
    let pod = pod(&input);
    assert_eq!(config_map_of(&pod), CUSTOM_CONFIG);
    assert_eq!(
        env(&pod.containers[0], "DEFAULT_VGPU_CONFIG"),
        Some("custom")
    );
    let children = crate::render::children(&input);
    let names: Vec<&str> = children
        .config_maps
        .iter()
        .map(|c| c.metadata.name.as_deref().unwrap())
        .collect();
    // NVIDIA's rule: no default ConfigMap when the user names their own.
    assert_eq!(names, [CUSTOM_CONFIG]);
    let labels = children.config_maps[0].metadata.labels.as_ref().unwrap();
    assert_eq!(labels["app.kubernetes.io/component"], "vgpu-device-manager");
}

#[test]
fn the_default_configurations_are_rendered_without_a_users_config_map() {
    let children = crate::render::children(&input(json!({}), false));
    assert_eq!(children.config_maps.len(), 1);
    let config_map = &children.config_maps[0];
    assert_eq!(config_map.metadata.name.as_deref(), Some(DEFAULT_CONFIG));
    let text = &config_map.data.as_ref().unwrap()["config.yaml"];
    assert_eq!(crate::config::configs(text).unwrap().len(), 711);
    let role = &children.cluster_roles[0].rules.as_ref().unwrap()[0];
    assert_eq!(role.resources.as_deref(), Some(&["nodes".to_owned()][..]));
    assert!(role.verbs.contains(&"update".to_owned()));
}

#[test]
fn every_setting_of_the_section_reaches_the_pod() {
    let pod = pod(&input(
        json!({
            "imagePullPolicy": "Always", "imagePullSecrets": ["vgpu-secret"],
            "resources": {"requests": {"cpu": "1"}},
            "args": ["--debug"],
            "env": [
                {"name": "CONFIG_FILE", "value": "/elsewhere.yaml"},
                {"name": "DEFAULT_VGPU_CONFIG", "value": "ignored"},
                {"name": "B", "value": "2"}
            ],
            "hostNetwork": true,
            "config": {"default": "A10-24Q"}
        }),
        false,
    ));
    let main = &pod.containers[0];
    assert_eq!(main.image_pull_policy.as_deref(), Some("Always"));
    assert_eq!(main.args.as_deref(), Some(&["--debug".to_owned()][..]));
    assert_eq!(env(main, "CONFIG_FILE"), Some("/elsewhere.yaml"));
    assert_eq!(env(main, "B"), Some("2"));
    // As NVIDIA's: config.default decides DEFAULT_VGPU_CONFIG, over the section's env.
    assert_eq!(env(main, "DEFAULT_VGPU_CONFIG"), Some("A10-24Q"));
    let resources = main.resources.as_ref().unwrap();
    assert_eq!(resources.requests.as_ref().unwrap()["cpu"].0, "1");
    assert_eq!(pod.host_network, Some(true));
    let secrets: Vec<&str> = pod
        .image_pull_secrets
        .iter()
        .flatten()
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(secrets, ["vgpu-secret"]);
}

#[test]
fn a_custom_root_fs_moves_the_host_root() {
    let mut spec = spec(Some(true), json!({"enabled": true}));
    spec.host_paths = Some(serde_json::from_value(json!({"rootFS": "/custom"})).unwrap());
    let pod = pod(&check(&spec, None).unwrap().unwrap());
    let root = pod
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == "host-root")
        .unwrap();
    assert_eq!(root.host_path.as_ref().unwrap().path, "/custom");
}
