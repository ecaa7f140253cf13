//! The sandbox validator's pod: NVIDIA's checks in NVIDIA's order, running our validator, and
//! every `spec.validator` setting NVIDIA applies to it.

use gpu_operator_api::{
    ClusterPolicySpec,
    spec::{CcManagerSpec, SandboxWorkloadsSpec, WorkloadConfig},
};
use gpu_operator_core::fixtures;
use serde_json::json;

use super::*;
use crate::validate;

/// The pod for section `validator`, sandbox workloads on with `default` workload, the CC manager
/// `cc`, and `hostPaths` `paths`.
fn pod(
    validator: serde_json::Value,
    default: Option<WorkloadConfig>,
    cc: bool,
    paths: serde_json::Value,
) -> PodSpec {
    let spec = ClusterPolicySpec {
        sandbox_workloads: Some(SandboxWorkloadsSpec {
            enabled: Some(true),
            default_workload: default,
            ..SandboxWorkloadsSpec::default()
        }),
        validator: Some(serde_json::from_value(validator).unwrap()),
        cc_manager: Some(CcManagerSpec {
            enabled: Some(cc),
            ..CcManagerSpec::default()
        }),
        host_paths: Some(serde_json::from_value(paths).unwrap()),
        ..ClusterPolicySpec::default()
    };
    let input = fixtures::with_cluster(&fixtures::image_env, |cluster| {
        validate::validate(&spec, cluster)
    })
    .unwrap()
    .unwrap();
    let ds = build(&input);
    assert_eq!(ds.metadata.name.as_deref(), Some(NAME));
    ds.spec.unwrap().template.spec.unwrap()
}

fn plain() -> PodSpec {
    pod(json!({}), None, false, json!({}))
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

fn names(containers: &[Container]) -> Vec<&str> {
    containers.iter().map(|c| c.name.as_str()).collect()
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
fn nvidias_checks_in_nvidias_order_without_the_cc_manager() {
    let pod = plain();
    assert_eq!(
        pod.node_selector.as_ref().unwrap()["nvidia.com/gpu.deploy.sandbox-validator"],
        "true"
    );
    assert_eq!(pod.service_account_name.as_deref(), Some(NAME));
    assert_eq!(pod.runtime_class_name, None, "NVIDIA sets none");
    let inits = pod.init_containers.as_ref().unwrap();
    assert_eq!(
        names(inits),
        [
            "vfio-pci-validation",
            "vgpu-manager-validation",
            "vgpu-devices-validation"
        ]
    );
    let with_cc = pod_with_cc();
    assert_eq!(
        names(with_cc.init_containers.as_ref().unwrap())[0],
        "cc-manager-validation"
    );
    assert_eq!(with_cc.init_containers.as_ref().unwrap().len(), 4);
}

fn pod_with_cc() -> PodSpec {
    pod(json!({}), None, true, json!({}))
}

#[test]
fn each_check_runs_our_validator_with_its_component_and_waits() {
    let pod = pod_with_cc();
    for init in pod.init_containers.as_ref().unwrap() {
        let component = init.name.trim_end_matches("-validation");
        assert_eq!(env(init, "COMPONENT"), Some(component));
        assert_eq!(env(init, "WITH_WAIT"), Some("true"));
        assert_eq!(env(init, "OUTPUT_DIR"), Some("/run/nvidia/validations"));
        let node = init.env.iter().flatten().find(|e| e.name == "NODE_NAME");
        assert!(node.unwrap().value_from.is_some(), "{component}");
        assert_eq!(
            init.command.as_deref(),
            Some(&["nvidia-validator".to_owned()][..])
        );
        assert_eq!(
            init.image.as_deref(),
            Some("registry.example.com/validator:v1")
        );
        let context = init.security_context.as_ref().unwrap();
        assert_eq!(
            (context.privileged, context.run_as_user),
            (Some(true), Some(0))
        );
        let se_linux = context.se_linux_options.is_some();
        assert_eq!(se_linux, component != "vgpu-devices", "{component}");
        let expected_workload = (component != "cc-manager").then_some("container");
        assert_eq!(env(init, "DEFAULT_GPU_WORKLOAD_CONFIG"), expected_workload);
        assert!(mounts(init).contains(&("run-nvidia-validations", "/run/nvidia/validations")));
    }
    let inits = pod.init_containers.as_ref().unwrap();
    assert!(mounts(&inits[1]).contains(&("host-root", "/host")));
    assert!(mounts(&inits[2]).contains(&("driver-install-dir", "/run/nvidia/driver")));
    assert_eq!(mounts(&inits[3]).len(), 1);
}

#[test]
fn the_main_container_idles_and_cleans_up_the_sandbox_files() {
    let pod = plain();
    let main = &pod.containers[0];
    assert_eq!(names(&pod.containers), [NAME]);
    assert_eq!(main.args.as_deref(), Some(&[IDLE_SCRIPT.to_owned()][..]));
    let hook = main.lifecycle.as_ref().unwrap().pre_stop.as_ref().unwrap();
    let command = hook.exec.as_ref().unwrap().command.as_ref().unwrap();
    assert!(command[2].contains("/run/nvidia/validations/vfio-pci-ready"));
    assert!(command[2].contains("/run/nvidia/validations/workload-type"));
    assert!(!command[2].contains('*'), "only the sandbox checks' files");
    let context = main.security_context.as_ref().unwrap();
    assert_eq!(
        (context.privileged, context.run_as_user),
        (Some(true), Some(0))
    );
}

#[test]
fn the_default_workload_reaches_the_workload_checks() {
    let pod = pod(
        json!({}),
        Some(WorkloadConfig::VmPassthrough),
        false,
        json!({}),
    );
    for init in pod.init_containers.as_ref().unwrap() {
        assert_eq!(
            env(init, "DEFAULT_GPU_WORKLOAD_CONFIG"),
            Some("vm-passthrough")
        );
    }
}

#[test]
fn every_validator_setting_nvidia_applies_reaches_the_pod() {
    let pod = pod(
        json!({
            "imagePullPolicy": "Always", "imagePullSecrets": ["validator-secret"],
            "resources": {"requests": {"cpu": "1"}},
            "args": ["sleep infinity"],
            "env": [{"name": "MAIN_ONLY", "value": "1"}],
            "hostNetwork": true,
            "vfioPCI": {"env": [{"name": "WITH_WAIT", "value": "false"}]},
            "vgpuManager": {"env": [{"name": "DEFAULT_GPU_WORKLOAD_CONFIG", "value": "vm-vgpu"}]},
            "vgpuDevices": {"env": [{"name": "D", "value": "3"}]}
        }),
        None,
        false,
        json!({}),
    );
    let inits = pod.init_containers.as_ref().unwrap();
    let main = &pod.containers[0];
    for container in inits.iter().chain([main]) {
        assert_eq!(container.image_pull_policy.as_deref(), Some("Always"));
        let requests = container.resources.as_ref().unwrap().requests.as_ref();
        assert_eq!(requests.unwrap()["cpu"].0, "1");
    }
    assert_eq!(
        pod.image_pull_secrets.as_ref().unwrap()[0].name,
        "validator-secret"
    );
    assert_eq!(
        main.args.as_deref(),
        Some(&["sleep infinity".to_owned()][..])
    );
    assert_eq!(env(main, "MAIN_ONLY"), Some("1"));
    assert!(inits.iter().all(|c| env(c, "MAIN_ONLY").is_none()));
    assert_eq!(env(&inits[0], "WITH_WAIT"), Some("false"));
    assert_eq!(
        env(&inits[1], "DEFAULT_GPU_WORKLOAD_CONFIG"),
        Some("vm-vgpu")
    );
    assert_eq!(env(&inits[2], "D"), Some("3"));
    assert_eq!(env(&inits[0], "D"), None);
    assert_eq!(pod.host_network, Some(true));
    assert_eq!(pod.dns_policy.as_deref(), Some("ClusterFirstWithHostNet"));
}

#[test]
fn host_paths_move_the_host_and_driver_roots() {
    let pod = pod(
        json!({}),
        None,
        false,
        json!({"rootFS": "/custom", "driverInstallDir": "/opt/driver"}),
    );
    let path = |name: &str| {
        let volume = pod.volumes.iter().flatten().find(|v| v.name == name);
        volume.unwrap().host_path.as_ref().unwrap().path.clone()
    };
    assert_eq!(path("host-root"), "/custom");
    assert_eq!(path("driver-install-dir"), "/opt/driver");
    assert_eq!(path("run-nvidia-validations"), "/run/nvidia/validations");
}
