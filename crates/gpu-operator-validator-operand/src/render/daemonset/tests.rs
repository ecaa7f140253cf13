//! Unit tests of `nvidia-operator-validator`, one per NVIDIA rule.

use gpu_operator_api::{
    ClusterPolicySpec,
    spec::{HealthSpec, MigSpec, MigStrategy, ValidatorComponentSpec, ValidatorSpec},
};
use gpu_operator_core::build::runtime_class::GpuAccess;

use super::*;

fn render(spec: &ClusterPolicySpec) -> PodSpec {
    let ds = build(&Input::new(
        spec,
        "ghcr.io/x/gpu-operator:1".into(),
        GpuAccess::RuntimeClass("nvidia".into()),
        "gpu-operator".into(),
        Some("ghcr.io/x/operator:2".into()),
    ));
    assert_eq!(
        ds.metadata.name.as_deref(),
        Some("nvidia-operator-validator")
    );
    ds.spec.unwrap().template.spec.unwrap()
}

fn init_names(pod: &PodSpec) -> Vec<String> {
    pod.init_containers
        .clone()
        .unwrap()
        .into_iter()
        .map(|c| c.name)
        .collect()
}

fn env(container: &Container, name: &str) -> Option<String> {
    container
        .env
        .clone()
        .unwrap()
        .into_iter()
        .find(|e| e.name == name)
        .and_then(|e| e.value)
}

#[test]
fn checks_run_in_nvidias_order_and_plugin_only_with_the_plugin() {
    let pod = render(&ClusterPolicySpec::default());
    assert_eq!(
        init_names(&pod),
        [
            "driver-validation",
            "toolkit-validation",
            "cuda-validation",
            "plugin-validation"
        ]
    );
    assert_eq!(
        pod.node_selector.unwrap()["nvidia.com/gpu.deploy.operator-validator"],
        "true"
    );
    let mut spec = ClusterPolicySpec::default();
    spec.device_plugin.enabled = Some(false);
    assert_eq!(
        init_names(&render(&spec)),
        ["driver-validation", "toolkit-validation", "cuda-validation"]
    );
}

#[test]
fn workload_checks_start_their_pods_with_the_runtime_class_or_nri_asks_for_the_toolkit_check() {
    let pod = render(&ClusterPolicySpec::default());
    assert_eq!(pod.runtime_class_name.as_deref(), Some("nvidia"));
    let checks = pod.init_containers.unwrap();
    let class = |i: usize| env(&checks[i], "VALIDATOR_RUNTIME_CLASS");
    assert_eq!((class(0), class(1)), (None, None));
    assert_eq!(class(2).as_deref(), Some("nvidia"));
    assert_eq!(class(3).as_deref(), Some("nvidia"));

    let ds = build(&Input::new(
        &ClusterPolicySpec::default(),
        "ghcr.io/x/gpu-operator:1".into(),
        GpuAccess::NriAnnotation,
        "gpu-operator".into(),
        None,
    ));
    let template = ds.spec.unwrap().template;
    let annotations = template.metadata.unwrap().annotations.unwrap();
    assert_eq!(
        annotations["nvidia.cdi.k8s.io/container.toolkit-validation"],
        "management.nvidia.com/gpu=all"
    );
    let pod = template.spec.unwrap();
    assert_eq!(pod.runtime_class_name, None);
    let checks = pod.init_containers.unwrap();
    assert!(
        checks
            .iter()
            .all(|c| env(c, "VALIDATOR_RUNTIME_CLASS").is_none())
    );
}

#[test]
fn the_plugin_check_gets_the_mig_strategy_and_component_env_wins() {
    let mut spec = ClusterPolicySpec {
        mig: Some(MigSpec {
            strategy: Some(MigStrategy::Mixed),
        }),
        ..ClusterPolicySpec::default()
    };
    spec.validator = Some(ValidatorSpec {
        plugin: Some(ValidatorComponentSpec {
            env: Some(vec![SpecEnvVar::new("WITH_WORKLOAD", "true")]),
        }),
        ..ValidatorSpec::default()
    });
    let pod = render(&spec);
    let plugin = &pod.init_containers.unwrap()[3];
    assert_eq!(env(plugin, "MIG_STRATEGY").as_deref(), Some("mixed"));
    assert_eq!(env(plugin, "WITH_WORKLOAD").as_deref(), Some("true"));
    assert_eq!(env(plugin, "COMPONENT").as_deref(), Some("plugin"));
}

#[test]
fn workload_checks_get_the_pull_settings_and_the_driver_check_the_dev_char_link_dir() {
    let spec = ClusterPolicySpec {
        validator: Some(ValidatorSpec {
            image: gpu_operator_api::spec::ImageSpec {
                pull_policy: Some("Always".into()),
                pull_secrets: Some(vec!["a".into(), "b".into()]),
                ..Default::default()
            },
            ..ValidatorSpec::default()
        }),
        ..ClusterPolicySpec::default()
    };
    let pod = render(&spec);
    let inits = pod.init_containers.unwrap();
    for workload in &inits[2..] {
        assert_eq!(
            env(workload, "VALIDATOR_IMAGE_PULL_POLICY").as_deref(),
            Some("Always")
        );
        assert_eq!(
            env(workload, "VALIDATOR_IMAGE_PULL_SECRETS").as_deref(),
            Some("a,b")
        );
    }
    assert_eq!(
        env(&inits[1], "NVIDIA_VISIBLE_DEVICES").as_deref(),
        Some("all")
    );
    assert!(
        inits[0]
            .volume_mounts
            .iter()
            .flatten()
            .any(|m| m.name == "host-dev-char" && m.mount_path == "/host-dev-char")
    );
}

#[test]
fn root_fs_and_driver_install_dir_are_rewritten() {
    let spec = ClusterPolicySpec {
        host_paths: Some(gpu_operator_api::spec::HostPathsSpec {
            root_fs: Some("/hostfs".into()),
            driver_install_dir: Some("/opt/driver".into()),
            ..Default::default()
        }),
        ..ClusterPolicySpec::default()
    };
    let pod = render(&spec);
    let driver = &pod.init_containers.as_ref().unwrap()[0];
    assert_eq!(env(driver, "HOST_ROOT").as_deref(), Some("/hostfs"));
    assert_eq!(
        env(driver, "DRIVER_INSTALL_DIR").as_deref(),
        Some("/opt/driver")
    );
    let dev_char = pod
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == "host-dev-char")
        .unwrap();
    assert_eq!(
        dev_char.host_path.as_ref().unwrap().path,
        "/hostfs/dev/char"
    );
}

#[test]
fn the_startup_taint_is_lifted_only_when_asked() {
    let pod = render(&ClusterPolicySpec::default());
    assert!(
        pod.init_containers
            .unwrap()
            .iter()
            .all(|c| env(c, "LIFT_STARTUP_TAINT").is_none())
    );
    let spec = ClusterPolicySpec {
        validator: Some(ValidatorSpec {
            lift_startup_taint: Some(true),
            ..ValidatorSpec::default()
        }),
        ..ClusterPolicySpec::default()
    };
    let pod = render(&spec);
    assert!(
        pod.init_containers
            .unwrap()
            .iter()
            .all(|c| env(c, "LIFT_STARTUP_TAINT").as_deref() == Some("true"))
    );
}

#[test]
fn the_driver_check_waits_and_the_main_container_cleans_up_on_stop() {
    let pod = render(&ClusterPolicySpec::default());
    assert_eq!(
        env(&pod.init_containers.clone().unwrap()[0], "WITH_WAIT").as_deref(),
        Some("true")
    );
    let pre_stop = pod.containers[0]
        .lifecycle
        .clone()
        .unwrap()
        .pre_stop
        .unwrap()
        .exec
        .unwrap()
        .command
        .unwrap();
    assert_eq!(pre_stop[..2], ["sh", "-c"]);
    // Run by a POSIX shell against a temporary status directory, the hook removes the status
    // files and nothing else.
    let dir = tempfile::tempdir().unwrap();
    for name in ["driver-ready", "toolkit-ready", "workload-type"] {
        std::fs::write(dir.path().join(name), "").unwrap();
    }
    let script = pre_stop[2].replace("/run/nvidia/validations", &dir.path().to_string_lossy());
    let status = std::process::Command::new("sh")
        .args(["-c", &script])
        .status()
        .unwrap();
    assert!(status.success());
    let left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["workload-type"]);
}

#[test]
fn the_main_container_idles_until_terminated_and_exits_at_once_on_term() {
    let pod = render(&ClusterPolicySpec::default());
    let main = &pod.containers[0];
    assert_eq!(main.command.clone().unwrap(), ["sh", "-c"]);
    let script = main.args.clone().unwrap().remove(0);
    let mut child = std::process::Command::new("sh")
        .args(["-c", &script])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the main container exited by itself"
    );
    let pid = child.id().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{:?}", out.status);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "all validations are successful\n"
    );
}

#[test]
fn the_driver_check_waits_for_the_driver_container_only_when_the_operator_deploys_it() {
    let pod = render(&ClusterPolicySpec::default());
    let driver = &pod.init_containers.clone().unwrap()[0];
    assert_eq!(
        env(driver, "DRIVER_MANAGED_BY_OPERATOR").as_deref(),
        Some("true")
    );
    let mut spec = ClusterPolicySpec::default();
    spec.driver.enabled = Some(false);
    let pod = render(&spec);
    let driver = &pod.init_containers.clone().unwrap()[0];
    assert_eq!(
        env(driver, "DRIVER_MANAGED_BY_OPERATOR").as_deref(),
        Some("false")
    );
}

#[test]
fn the_health_agent_runs_the_operators_image_beside_the_idle_container() {
    let pod = render(&ClusterPolicySpec::default());
    let names: Vec<&str> = pod.containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["nvidia-operator-validator", "gpu-health"]);
    let health = &pod.containers[1];
    assert_eq!(health.image.as_deref(), Some("ghcr.io/x/operator:2"));
    assert_eq!(
        health.command.clone().unwrap(),
        ["gpu-operator-validator", "health"]
    );
    assert_eq!(env(health, "HEALTH_POLL_SECONDS").as_deref(), Some("30"));
    assert_eq!(env(health, "HEALTH_TAINT_UNHEALTHY"), None);
    assert_eq!(env(health, "HOST_ROOT_CTR_PATH").as_deref(), Some("/host"));
    assert_eq!(
        health.security_context.as_ref().unwrap().privileged,
        Some(true)
    );

    let spec = ClusterPolicySpec {
        validator: Some(ValidatorSpec {
            health: Some(HealthSpec {
                enabled: Some(false),
                ..HealthSpec::default()
            }),
            ..ValidatorSpec::default()
        }),
        ..ClusterPolicySpec::default()
    };
    assert_eq!(
        render(&spec).containers.len(),
        1,
        "validator.health.enabled=false"
    );
}
