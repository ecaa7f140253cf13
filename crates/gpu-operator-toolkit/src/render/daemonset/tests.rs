//! Rules of the toolkit DaemonSet: runtime wiring, user env wins, CDI env, install dir, barrier.

use gpu_operator_api::{
    ClusterPolicySpec,
    spec::{CdiSpec, EnvVar as SpecEnvVar},
};

use super::*;

fn render(spec: &ClusterPolicySpec, runtime: ContainerRuntime) -> PodSpec {
    let ds = build(&Input::new(
        spec,
        "gpu-operator".into(),
        "nvcr.io/nvidia/k8s/container-toolkit:v1.20.0".into(),
        "ghcr.io/example/gpu-operator:1".into(),
        runtime,
    ));
    assert_eq!(
        ds.metadata.name.as_deref(),
        Some("nvidia-container-toolkit-daemonset")
    );
    ds.spec.unwrap().template.spec.unwrap()
}

fn value(pod: &PodSpec, name: &str) -> Option<String> {
    pod.containers[0]
        .env
        .iter()
        .flatten()
        .find(|e| e.name == name)
        .and_then(|e| e.value.clone())
}

#[test]
fn the_driver_barrier_runs_first_and_no_runtime_class_is_set() {
    let pod = render(&ClusterPolicySpec::default(), ContainerRuntime::Containerd);
    let init = &pod.init_containers.clone().unwrap()[0];
    assert_eq!(init.name, "driver-validation");
    assert_eq!(init.command.clone().unwrap(), ["sh", "-c"]);
    assert!(
        init.args.clone().unwrap()[0].contains("[ -f /run/nvidia/validations/driver-ready ]"),
        "{:?}",
        init.args
    );
    assert_eq!(
        init.image.as_deref(),
        Some("ghcr.io/example/gpu-operator:1")
    );
    assert!(pod.runtime_class_name.is_none());
    assert_eq!(
        pod.node_selector.unwrap()["nvidia.com/gpu.deploy.container-toolkit"],
        "true"
    );
    assert_eq!(
        pod.service_account_name.as_deref(),
        Some("nvidia-container-toolkit")
    );
}

#[test]
fn cdi_env_is_on_by_default_and_crio_without_cdi_uses_the_hook() {
    let pod = render(&ClusterPolicySpec::default(), ContainerRuntime::CriO);
    assert_eq!(value(&pod, "CDI_ENABLED").as_deref(), Some("true"));
    assert_eq!(
        value(&pod, "NVIDIA_CONTAINER_RUNTIME_MODE").as_deref(),
        Some("cdi")
    );
    assert_eq!(value(&pod, "CRIO_CONFIG_MODE").as_deref(), Some("config"));
    assert_eq!(value(&pod, "RUNTIME").as_deref(), Some("crio"));
    let no_cdi = ClusterPolicySpec {
        cdi: Some(CdiSpec {
            enabled: Some(false),
            ..CdiSpec::default()
        }),
        ..ClusterPolicySpec::default()
    };
    let pod = render(&no_cdi, ContainerRuntime::CriO);
    assert_eq!(value(&pod, "CRIO_CONFIG_MODE").as_deref(), Some("hook"));
    assert_eq!(value(&pod, "CDI_ENABLED"), None);
    let hooks = pod
        .volumes
        .unwrap()
        .into_iter()
        .find(|v| v.name == "crio-hooks");
    assert_eq!(
        hooks.unwrap().host_path.unwrap().path,
        "/usr/share/containers/oci/hooks.d"
    );
    assert_eq!(
        value(
            &render(&no_cdi, ContainerRuntime::Containerd),
            "CRIO_CONFIG_MODE"
        ),
        None
    );
}

#[test]
fn user_env_wins_by_name_and_host_paths_are_translated() {
    let mut spec = ClusterPolicySpec::default();
    spec.toolkit.container.env = Some(vec![
        SpecEnvVar::new("NVIDIA_RUNTIME_SET_AS_DEFAULT", "true"),
        SpecEnvVar::new("CONTAINERD_RUNTIME_CLASS", "nvidia-custom"),
        SpecEnvVar::new("CONTAINERD_CONFIG", "/etc/k3s/containerd/config.toml"),
        SpecEnvVar::new("EXTRA", "1"),
    ]);
    let pod = render(&spec, ContainerRuntime::Containerd);
    assert_eq!(
        value(&pod, "NVIDIA_RUNTIME_SET_AS_DEFAULT").as_deref(),
        Some("true")
    );
    assert_eq!(
        value(&pod, "CONTAINERD_RUNTIME_CLASS").as_deref(),
        Some("nvidia-custom")
    );
    assert_eq!(value(&pod, "EXTRA").as_deref(), Some("1"));
    assert_eq!(
        value(&pod, "CONTAINERD_CONFIG").as_deref(),
        Some("/runtime/config-dir/config.toml")
    );
    let config = pod
        .volumes
        .unwrap()
        .into_iter()
        .find(|v| v.name == "containerd-config");
    assert_eq!(
        config.unwrap().host_path.unwrap().path,
        "/etc/k3s/containerd"
    );
}

#[test]
fn install_dir_sets_root_and_the_host_path() {
    let mut spec = ClusterPolicySpec::default();
    assert_eq!(
        value(&render(&spec, ContainerRuntime::Containerd), "ROOT").as_deref(),
        Some("/usr/local/nvidia")
    );
    spec.toolkit.install_dir = Some("/opt/nvidia".into());
    let pod = render(&spec, ContainerRuntime::Containerd);
    assert_eq!(value(&pod, "ROOT").as_deref(), Some("/opt/nvidia"));
    let dir = pod
        .volumes
        .clone()
        .unwrap()
        .into_iter()
        .find(|v| v.name == "toolkit-install-dir");
    assert_eq!(dir.unwrap().host_path.unwrap().path, "/opt/nvidia");
    let mount = pod.containers[0]
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.name == "toolkit-install-dir")
        .unwrap();
    assert_eq!(mount.mount_path, "/opt/nvidia");
}
