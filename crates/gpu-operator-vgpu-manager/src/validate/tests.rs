//! Tests of the vGPU manager's validation.

use std::sync::Arc;

use gpu_operator_api::spec::{SandboxWorkloadsSpec, VgpuManagerSpec};
use gpu_operator_core::{cache::facts::LiveDaemonSet, fixtures};
use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::json;

use super::*;

/// `spec` with sandbox workloads `sandbox` and section `vgpuManager`.
pub(crate) fn spec(sandbox: Option<bool>, section: serde_json::Value) -> ClusterPolicySpec {
    ClusterPolicySpec {
        sandbox_workloads: Some(SandboxWorkloadsSpec {
            enabled: sandbox,
            ..SandboxWorkloadsSpec::default()
        }),
        vgpu_manager: Some(serde_json::from_value::<VgpuManagerSpec>(section).unwrap()),
        ..ClusterPolicySpec::default()
    }
}

pub(crate) fn os(id: &str, version: &str) -> OsRelease {
    OsRelease {
        id: id.into(),
        version_id: version.into(),
    }
}

/// `vm-vgpu` GPU nodes of `oses`, and `nodes_without_os` more without NFD's labels.
pub(crate) fn facts(oses: &[OsRelease], nodes_without_os: usize) -> ClusterFacts {
    let vgpu = |os: Option<&OsRelease>| ("vm-vgpu".to_owned(), os.cloned());
    let mut by_workload_os: std::collections::BTreeMap<_, usize> =
        oses.iter().map(|os| (vgpu(Some(os)), 1)).collect();
    if nodes_without_os > 0 {
        by_workload_os.insert(vgpu(None), nodes_without_os);
    }
    ClusterFacts {
        gpu_nodes: oses.len() + nodes_without_os,
        os_releases: oses.iter().cloned().collect(),
        gpu_nodes_without_os: nodes_without_os,
        gpu_nodes_by_workload_os: by_workload_os,
        ..ClusterFacts::default()
    }
}

fn module_config(name: &str) -> Option<Arc<ConfigMap>> {
    (name == "vgpu-modules").then(|| {
        Arc::new(ConfigMap {
            data: Some(
                [("nvidia.conf", "NVreg_X=1"), ("a.conf", "")]
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .into(),
            ),
            ..ConfigMap::default()
        })
    })
}

pub(crate) fn check_with(
    spec: &ClusterPolicySpec,
    facts: &ClusterFacts,
    image_env: &(dyn Fn(&str) -> Option<String> + Sync),
) -> Result<Option<Input>, Error> {
    validate(
        spec,
        &Cluster {
            namespace: "gpu-operator",
            facts,
            image_env,
            config_maps: &module_config,
            policy: None,
            server: gpu_operator_core::cache::server_facts::ServerFacts::unknown(),
        },
    )
}

fn check(spec: &ClusterPolicySpec) -> Result<Option<Input>, Error> {
    check_with(
        spec,
        &facts(&[os("ubuntu", "22.04")], 0),
        &fixtures::image_env,
    )
}

#[test]
fn deployed_only_with_sandbox_workloads_and_the_section_enabled() {
    // NVIDIA: `sandboxEnabled && vgpuManager.IsEnabled()`, and an unset `enabled` is false.
    let on = json!({"enabled": true});
    for (sandbox, section, deployed) in [
        (Some(true), on.clone(), true),
        (Some(true), json!({}), false),
        (Some(true), json!({"enabled": false}), false),
        (Some(false), on.clone(), false),
        (None, on.clone(), false),
    ] {
        let input = check(&spec(sandbox, section.clone())).unwrap();
        assert_eq!(input.is_some(), deployed, "{sandbox:?} {section}");
    }
    let mut no_section = spec(Some(true), on.clone());
    no_section.vgpu_manager = None;
    assert!(check(&no_section).unwrap().is_none());
    assert!(check(&ClusterPolicySpec::default()).unwrap().is_none());
    // NVIDIA skips state-vgpu-manager when NVIDIADriver objects deploy the drivers.
    let mut crd = spec(Some(true), on);
    crd.driver.use_nvidia_driver_crd = Some(true);
    assert!(check(&crd).unwrap().is_none());
}

#[test]
fn the_image_gets_the_os_tag_unless_pinned_by_digest() {
    let input = check(&spec(Some(true), json!({"enabled": true})))
        .unwrap()
        .unwrap();
    let served = input.os.unwrap();
    assert_eq!(served.os, os("ubuntu", "22.04"));
    assert_eq!(
        served.image,
        "registry.example.com/vgpu-manager:v1-ubuntu22.04"
    );
    assert_eq!(
        input.manager_image,
        "registry.example.com/driver-manager:v1"
    );
    assert!(input.other_oses.is_empty() && input.unserved.is_none());
    let section = json!({
        "enabled": true, "repository": "registry.local", "image": "vgpu",
        "version": "550.90.05"
    });
    let rhel = check_with(
        &spec(Some(true), section),
        &facts(&[os("rhel", "9.4")], 0),
        &fixtures::image_env,
    )
    .unwrap()
    .unwrap();
    assert_eq!(
        rhel.os.unwrap().image,
        "registry.local/vgpu:550.90.05-rhel9"
    );
    let pinned = json!({
        "enabled": true, "repository": "registry.local", "image": "vgpu",
        "version": "sha256:abc"
    });
    let input = check(&spec(Some(true), pinned)).unwrap().unwrap();
    assert_eq!(input.os.unwrap().image, "registry.local/vgpu@sha256:abc");
}

#[test]
fn one_os_is_served_and_the_live_daemonsets_os_is_kept() {
    let enabled = spec(Some(true), json!({"enabled": true}));
    let mut two = facts(&[os("ubuntu", "22.04"), os("rhel", "9.4")], 1);
    let input = check_with(&enabled, &two, &fixtures::image_env)
        .unwrap()
        .unwrap();
    // The first OS in order; the other is named, the nodes without labels are unserved.
    assert_eq!(input.os.as_ref().unwrap().os, os("rhel", "9.4"));
    assert_eq!(input.other_oses, ["ubuntu22.04"]);
    assert!(input.unserved.unwrap().contains("1 vm-vgpu GPU node(s)"));
    two.daemonsets.insert(
        DAEMONSET.to_owned(),
        LiveDaemonSet {
            node_selector: [
                (NFD_OS_RELEASE_ID.to_owned(), "ubuntu".to_owned()),
                (NFD_OS_RELEASE_VERSION_ID.to_owned(), "22.04".to_owned()),
            ]
            .into(),
            images: Vec::new(),
        },
    );
    let input = check_with(&enabled, &two, &fixtures::image_env)
        .unwrap()
        .unwrap();
    assert_eq!(input.os.unwrap().os, os("ubuntu", "22.04"));
    assert_eq!(input.other_oses, ["rhel9"]);
    // A container node of another OS is not the vGPU manager's business.
    let mut mixed = facts(&[os("rhel", "9.4")], 0);
    mixed.os_releases.insert(os("ubuntu", "22.04"));
    mixed
        .gpu_nodes_by_workload_os
        .insert((String::new(), Some(os("ubuntu", "22.04"))), 3);
    let input = check_with(&enabled, &mixed, &fixtures::image_env)
        .unwrap()
        .unwrap();
    assert_eq!(input.os.unwrap().os, os("rhel", "9.4"));
    assert!(input.other_oses.is_empty(), "{:?}", input.other_oses);
    // No OS known: nothing to tag the image with.
    let none = check_with(&enabled, &facts(&[], 0), &fixtures::image_env)
        .unwrap()
        .unwrap();
    assert!(none.os.is_none() && none.unserved.is_none());
}

#[test]
fn the_section_and_its_driver_manager_name_their_images_and_settings() {
    let section = json!({
        "enabled": true,
        "imagePullPolicy": "Always", "imagePullSecrets": ["vgpu-secret"],
        "resources": {"limits": {"memory": "1Gi"}},
        "args": ["init", "--debug"],
        "env": [{"name": "A", "value": "1"}],
        "hostNetwork": true,
        "kernelModuleConfig": {"name": "vgpu-modules"},
        "driverManager": {
            "repository": "registry.local", "image": "manager", "version": "sha256:abc",
            "imagePullPolicy": "Never", "imagePullSecrets": ["manager-secret"],
            "env": [{"name": "ENABLE_GPU_POD_EVICTION", "value": "true"}]
        }
    });
    let input = check(&spec(Some(true), section)).unwrap().unwrap();
    assert_eq!(input.manager_image, "registry.local/manager@sha256:abc");
    assert_eq!(input.manager_pull.policy, Some("Never"));
    assert_eq!(input.manager_pull.secrets, ["manager-secret"]);
    assert_eq!(input.manager_env[0].name, "ENABLE_GPU_POD_EVICTION");
    assert_eq!(input.component.pull_policy, "Always");
    assert_eq!(input.component.pull_secrets, ["vgpu-secret"]);
    assert!(input.component.resources.is_some());
    assert_eq!(input.component.args, ["init", "--debug"]);
    assert_eq!(input.component.user_env("A"), Some("1"));
    assert!(input.component.host_network);
    let (name, keys) = input.kernel_module_config.unwrap();
    assert_eq!(name, "vgpu-modules");
    assert_eq!(keys, ["a.conf", "nvidia.conf"]);
}

#[test]
fn bad_input_is_an_error_naming_the_field_and_the_fix() {
    let nothing = |_: &str| None;
    let enabled = spec(Some(true), json!({"enabled": true}));
    let ubuntu = facts(&[os("ubuntu", "22.04")], 0);
    let error = check_with(&enabled, &ubuntu, &nothing)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("spec.vgpuManager.repository") && error.contains(IMAGE_ENV),
        "{error}"
    );
    let only_own = |name: &str| (name == IMAGE_ENV).then(|| "vgpu:1".to_owned());
    let error = check_with(&enabled, &ubuntu, &only_own)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("vgpuManager.driverManager") && error.contains(MANAGER_IMAGE_ENV),
        "{error}"
    );
    let partial = spec(
        Some(true),
        json!({"enabled": true, "image": "x", "version": "1"}),
    );
    let error = check(&partial).unwrap_err().to_string();
    assert!(error.contains("vgpuManager: incomplete image"), "{error}");
    let missing = spec(
        Some(true),
        json!({"enabled": true, "kernelModuleConfig": {"name": "absent"}}),
    );
    let error = check(&missing).unwrap_err().to_string();
    assert!(
        error.contains("vgpuManager.kernelModuleConfig.name") && error.contains("absent"),
        "{error}"
    );
    // An empty name is unset.
    let empty = spec(
        Some(true),
        json!({"enabled": true, "kernelModuleConfig": {"name": ""}}),
    );
    assert!(
        check(&empty)
            .unwrap()
            .unwrap()
            .kernel_module_config
            .is_none()
    );
}
