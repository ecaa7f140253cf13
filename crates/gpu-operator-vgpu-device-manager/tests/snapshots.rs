//! The vGPU device manager rendered for every example ClusterPolicy × node profile (no example
//! turns sandbox workloads on, so each renders `disabled`), for each example with sandbox
//! workloads and the vGPU device manager switched on, and its default configurations as text.
#![allow(clippy::unwrap_used)]

use gpu_operator_api::spec::{SandboxWorkloadsSpec, VgpuDeviceManagerSpec};
use gpu_operator_core::{
    contract::{Cluster, Operand},
    fixtures,
};
use gpu_operator_vgpu_device_manager::{VgpuDeviceManager, configs, default_config};

fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn every_example_on_every_profile() {
    for (name, rendered) in fixtures::snapshots::<VgpuDeviceManager>(&root()).unwrap() {
        insta::assert_yaml_snapshot!(name, rendered);
    }
}

#[test]
fn every_example_with_sandbox_workloads_on() {
    let mut seen: Vec<serde_json::Value> = Vec::new();
    for (example, mut spec) in fixtures::examples(&root()).unwrap() {
        let sandbox = spec
            .sandbox_workloads
            .get_or_insert_with(SandboxWorkloadsSpec::default);
        sandbox.enabled = Some(true);
        spec.vgpu_device_manager
            .get_or_insert_with(VgpuDeviceManagerSpec::default)
            .enabled = Some(true);
        let rendered = fixtures::with_cluster(&fixtures::image_env, |cluster: &Cluster<'_>| {
            let input = VgpuDeviceManager::validate(&spec, cluster)
                .unwrap()
                .unwrap();
            let mut children = VgpuDeviceManager::render(&input);
            // The default configurations are their own snapshot, below.
            for config_map in &mut children.config_maps {
                if let Some(data) = config_map.data.as_mut() {
                    for value in data.values_mut() {
                        *value = format!("<{} lines>", value.lines().count());
                    }
                }
            }
            serde_json::json!({
                "serviceAccounts": children.service_accounts,
                "roles": children.roles,
                "roleBindings": children.role_bindings,
                "clusterRoles": children.cluster_roles,
                "clusterRoleBindings": children.cluster_role_bindings,
                "configMaps": children.config_maps,
                "daemonSets": children.daemonsets,
            })
        });
        // One snapshot per distinct output.
        if !seen.contains(&rendered) {
            insta::assert_yaml_snapshot!(format!("sandbox-{example}"), rendered);
            seen.push(rendered);
        }
    }
}

#[test]
fn the_default_configurations() {
    let text = default_config();
    let names = configs(text).unwrap();
    for name in [
        "default",
        "A10-24Q",
        "A100-1-5C",
        "L40S-48Q",
        "RTX6000-Ada-24Q",
        "DC-4-96QGFX",
    ] {
        assert!(names.iter().any(|n| n == name), "{name}");
    }
    insta::assert_snapshot!("default-vgpu-devices-config", text);
}
