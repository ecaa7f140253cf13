//! Tests of the vGPU manager's DaemonSet.

use serde_json::json;

use super::*;
use crate::validate::{
    self,
    tests::{facts, os, spec},
};

/// The DaemonSet for section `vgpuManager` (enabled, sandbox workloads on) on Ubuntu 22.04 GPU
/// nodes, with `hostPaths.rootFS` `root`.
fn daemonset(section: serde_json::Value, root: Option<&str>) -> DaemonSet {
    let mut spec = spec(Some(true), section);
    if let Some(section) = spec.vgpu_manager.as_mut() {
        section.enabled = Some(true);
    }
    if let Some(root) = root {
        spec.host_paths = Some(serde_json::from_value(json!({"rootFS": root})).unwrap());
    }
    let input = validate::tests::check_with(
        &spec,
        &facts(&[os("ubuntu", "22.04")], 0),
        &gpu_operator_core::fixtures::image_env,
    )
    .unwrap()
    .unwrap();
    let mut children = crate::render::children(&input);
    assert_eq!(children.daemonsets.len(), 1);
    let ds = children.daemonsets.remove(0);
    assert_eq!(ds.metadata.name.as_deref(), Some(DAEMONSET));
    ds
}

fn pod(ds: &DaemonSet) -> &PodSpec {
    ds.spec.as_ref().unwrap().template.spec.as_ref().unwrap()
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

fn mounts(container: &Container) -> Vec<(&str, &str)> {
    container
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| (m.name.as_str(), m.mount_path.as_str()))
        .collect()
}

#[test]
fn nvidias_pod_by_default() {
    let ds = daemonset(json!({}), None);
    let template = ds
        .spec
        .as_ref()
        .unwrap()
        .template
        .metadata
        .as_ref()
        .unwrap();
    assert_eq!(
        template.annotations.as_ref().unwrap()["kubectl.kubernetes.io/default-container"],
        CONTAINER
    );
    assert_eq!(template.labels.as_ref().unwrap()["app"], DAEMONSET);
    let pod = pod(&ds);
    let selector = pod.node_selector.as_ref().unwrap();
    assert_eq!(selector["nvidia.com/gpu.deploy.vgpu-manager"], "true");
    assert_eq!(selector[NFD_OS_RELEASE_ID], "ubuntu");
    assert_eq!(selector[NFD_OS_RELEASE_VERSION_ID], "22.04");
    assert_eq!(pod.service_account_name.as_deref(), Some(SERVICE_ACCOUNT));
    assert_eq!((pod.host_pid, pod.host_ipc), (Some(true), Some(true)));
    assert_eq!(pod.termination_grace_period_seconds, Some(120));
    let init = &pod.init_containers.as_ref().unwrap()[0];
    assert_eq!(init.name, MANAGER_CONTAINER);
    assert_eq!(
        init.args.as_deref(),
        Some(&["uninstall_driver".to_owned()][..])
    );
    assert_eq!(env(init, "ENABLE_GPU_POD_EVICTION"), Some("false"));
    assert_eq!(env(init, "ENABLE_AUTO_DRAIN"), Some("false"));
    assert_eq!(env(init, "NVIDIA_VISIBLE_DEVICES"), Some("void"));
    assert_eq!(init.image_pull_policy.as_deref(), Some("IfNotPresent"));
    assert_eq!(pod.containers.len(), 1);
    let main = &pod.containers[0];
    assert_eq!(main.name, CONTAINER);
    assert_eq!(
        main.image.as_deref(),
        Some("registry.example.com/vgpu-manager:v1-ubuntu22.04")
    );
    assert_eq!(
        main.command.as_deref(),
        Some(&["nvidia-driver".to_owned()][..])
    );
    assert_eq!(main.args.as_deref(), Some(&["init".to_owned()][..]));
    assert!(main.env.is_none());
    assert!(main.startup_probe.is_none() && main.liveness_probe.is_none());
    let context = main.security_context.as_ref().unwrap();
    assert_eq!(context.privileged, Some(true));
    assert_eq!(
        context.se_linux_options.as_ref().unwrap().level.as_deref(),
        Some("s0")
    );
    assert_eq!(
        mounts(main),
        [
            ("run-nvidia", "/run/nvidia"),
            ("host-os-release", "/host-etc/os-release"),
            ("vfio", "/dev/vfio"),
            ("cgroup", "/sys/fs/cgroup"),
            ("var-log", "/var/log"),
            ("dev-log", "/dev/log"),
            (
                "firmware-search-path",
                "/sys/module/firmware_class/parameters/path"
            ),
            ("nv-firmware", "/lib/firmware"),
        ]
    );
    assert_eq!(main.resources, None);
    assert_eq!(pod.host_network, None);
    assert!(pod.image_pull_secrets.is_none());
}

#[test]
fn every_setting_of_the_section_reaches_the_pod() {
    let ds = daemonset(
        json!({
            "imagePullPolicy": "Always", "imagePullSecrets": ["vgpu-secret"],
            "resources": {"requests": {"cpu": "1"}},
            "args": ["init", "--debug"],
            "env": [{"name": "B", "value": "2"}],
            "hostNetwork": true,
            "kernelModuleConfig": {"name": "vgpu-modules"},
            "driverManager": {
                "imagePullPolicy": "Never", "imagePullSecrets": ["manager-secret"],
                "env": [{"name": "ENABLE_GPU_POD_EVICTION", "value": "true"}]
            }
        }),
        None,
    );
    let pod = pod(&ds);
    let (init, main) = (
        &pod.init_containers.as_ref().unwrap()[0],
        &pod.containers[0],
    );
    assert_eq!(main.image_pull_policy.as_deref(), Some("Always"));
    assert_eq!(init.image_pull_policy.as_deref(), Some("Never"));
    let secrets: Vec<&str> = pod
        .image_pull_secrets
        .iter()
        .flatten()
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(secrets, ["vgpu-secret", "manager-secret"]);
    for container in [init, main] {
        let resources = container.resources.as_ref().unwrap();
        assert_eq!(resources.requests.as_ref().unwrap()["cpu"].0, "1");
    }
    assert_eq!(
        main.args.as_deref(),
        Some(&["init".to_owned(), "--debug".to_owned()][..])
    );
    assert_eq!(env(main, "B"), Some("2"));
    assert_eq!(env(init, "B"), None);
    assert_eq!(env(init, "ENABLE_GPU_POD_EVICTION"), Some("true"));
    assert_eq!(pod.host_network, Some(true));
    // NVIDIA: one read-only file mount per key of the ConfigMap, under /drivers.
    let module_mounts: Vec<_> = main
        .volume_mounts
        .iter()
        .flatten()
        .filter(|m| m.name == "vgpu-modules")
        .map(|m| (m.mount_path.as_str(), m.sub_path.as_deref(), m.read_only))
        .collect();
    assert_eq!(
        module_mounts,
        [
            ("/drivers/a.conf", Some("a.conf"), Some(true)),
            ("/drivers/nvidia.conf", Some("nvidia.conf"), Some(true)),
        ]
    );
    let volume = pod
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == "vgpu-modules")
        .unwrap();
    assert_eq!(
        volume
            .config_map
            .as_ref()
            .unwrap()
            .items
            .as_ref()
            .unwrap()
            .len(),
        2
    );
}

#[test]
fn a_custom_root_fs_moves_the_host_root() {
    let ds = daemonset(json!({}), Some("/custom"));
    let root = pod(&ds)
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == "host-root")
        .unwrap();
    assert_eq!(root.host_path.as_ref().unwrap().path, "/custom");
}
