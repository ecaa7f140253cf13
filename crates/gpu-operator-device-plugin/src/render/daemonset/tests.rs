//! Unit tests of `nvidia-device-plugin-daemonset`, one per NVIDIA rule.

use gpu_operator_api::{
    ClusterPolicySpec,
    spec::{DevicePluginConfig, EnvVar, GdsSpec, HostPathsSpec, MigSpec, MigStrategy, MpsConfig},
};
use gpu_operator_core::build::runtime_class::GpuAccess;

use super::*;

#[allow(clippy::needless_pass_by_value)] // callers build the spec inline
fn render(spec: ClusterPolicySpec) -> DaemonSet {
    build(&crate::validate::for_tests(&spec))
}

fn pod(ds: &DaemonSet) -> &PodSpec {
    ds.spec.as_ref().unwrap().template.spec.as_ref().unwrap()
}

fn value(ds: &DaemonSet, name: &str) -> Option<String> {
    pod(ds).containers[0]
        .env
        .iter()
        .flatten()
        .find(|e| e.name == name)
        .and_then(|e| e.value.clone())
}

fn with_mig(strategy: MigStrategy) -> ClusterPolicySpec {
    ClusterPolicySpec {
        mig: Some(MigSpec {
            strategy: Some(strategy),
        }),
        ..ClusterPolicySpec::default()
    }
}

#[test]
fn names_selector_image_and_barrier_follow_nvidia() {
    let ds = render(ClusterPolicySpec::default());
    assert_eq!(
        ds.metadata.name.as_deref(),
        Some("nvidia-device-plugin-daemonset")
    );
    assert_eq!(
        ds.metadata.labels.as_ref().unwrap()["app"],
        "nvidia-device-plugin-daemonset"
    );
    let pod = pod(&ds);
    assert_eq!(
        pod.node_selector.as_ref().unwrap()["nvidia.com/gpu.deploy.device-plugin"],
        "true"
    );
    assert_eq!(
        pod.service_account_name.as_deref(),
        Some("nvidia-device-plugin")
    );
    assert_eq!(
        pod.containers[0].image.as_deref(),
        Some("registry.example.com/device-plugin:v1")
    );
    let barrier = &pod.init_containers.as_ref().unwrap()[0];
    assert_eq!(barrier.name, "toolkit-validation");
    assert_eq!(
        barrier.image.as_deref(),
        Some("registry.example.com/validator:v1")
    );
    assert_eq!(
        pod.containers.len(),
        1,
        "no config manager without a config"
    );
}

#[test]
fn mig_strategy_env_follows_nvidia() {
    let default = render(ClusterPolicySpec::default());
    assert_eq!(value(&default, "MIG_STRATEGY"), None);
    assert_eq!(
        value(&default, "NVIDIA_MIG_MONITOR_DEVICES").as_deref(),
        Some("all")
    );
    let mixed = render(with_mig(MigStrategy::Mixed));
    assert_eq!(value(&mixed, "MIG_STRATEGY").as_deref(), Some("mixed"));
    let none = render(with_mig(MigStrategy::None));
    assert_eq!(value(&none, "MIG_STRATEGY").as_deref(), Some("none"));
    assert_eq!(value(&none, "NVIDIA_MIG_MONITOR_DEVICES"), None);
}

#[test]
fn cdi_is_on_by_default_and_user_env_wins() {
    let mut spec = ClusterPolicySpec::default();
    spec.device_plugin.container.env = Some(vec![EnvVar::new("DEVICE_ID_STRATEGY", "index")]);
    let ds = render(spec);
    assert_eq!(value(&ds, "CDI_ENABLED").as_deref(), Some("true"));
    assert_eq!(
        value(&ds, "DEVICE_LIST_STRATEGY").as_deref(),
        Some("cdi-annotations,cdi-cri")
    );
    assert_eq!(
        value(&ds, "NVIDIA_CDI_HOOK_PATH").as_deref(),
        Some("/usr/local/nvidia/toolkit/nvidia-cdi-hook")
    );
    assert_eq!(value(&ds, "DEVICE_ID_STRATEGY").as_deref(), Some("index"));
    let mut no_toolkit = ClusterPolicySpec::default();
    no_toolkit.toolkit.enabled = Some(false);
    assert_eq!(value(&render(no_toolkit), "NVIDIA_CDI_HOOK_PATH"), None);
}

#[test]
fn gds_turns_on_gds_and_mofed_support() {
    let spec = ClusterPolicySpec {
        gds: Some(GdsSpec {
            enabled: Some(true),
            ..GdsSpec::default()
        }),
        ..ClusterPolicySpec::default()
    };
    let ds = render(spec);
    assert_eq!(value(&ds, "GDS_ENABLED").as_deref(), Some("true"));
    assert_eq!(value(&ds, "MOFED_ENABLED").as_deref(), Some("true"));
    assert_eq!(value(&ds, "GDRCOPY_ENABLED"), None);
}

#[test]
fn a_config_adds_the_config_manager_signalling_the_plugin() {
    let mut spec = ClusterPolicySpec::default();
    spec.device_plugin.config = Some(DevicePluginConfig {
        name: Some("time-slicing-config".into()),
        default: Some("any".into()),
    });
    let ds = render(spec);
    let pod = pod(&ds);
    let inits: Vec<_> = pod
        .init_containers
        .iter()
        .flatten()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(inits, ["toolkit-validation", "config-manager-init"]);
    assert_eq!(pod.containers[1].name, "config-manager");
    assert_eq!(pod.share_process_namespace, Some(true));
    assert_eq!(
        value(&ds, "CONFIG_FILE").as_deref(),
        Some("/config/config.yaml")
    );
    let signal = pod.containers[1]
        .env
        .iter()
        .flatten()
        .find(|e| e.name == "PROCESS_TO_SIGNAL")
        .unwrap();
    assert_eq!(signal.value.as_deref(), Some("nvidia-device-plugin"));
}

#[test]
fn mps_root_sets_the_env_and_both_host_paths() {
    let mut spec = ClusterPolicySpec::default();
    spec.device_plugin.mps = Some(MpsConfig {
        root: Some("/var/mps".into()),
    });
    let ds = render(spec);
    assert_eq!(value(&ds, "MPS_ROOT").as_deref(), Some("/var/mps"));
    let shm = pod(&ds)
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == "mps-shm")
        .unwrap();
    assert_eq!(shm.host_path.as_ref().unwrap().path, "/var/mps/shm");
}

#[test]
fn args_replace_the_entrypoint_and_kubelet_root_moves_the_socket_dir() {
    let mut spec = ClusterPolicySpec::default();
    spec.device_plugin.container.args = Some(vec!["nvidia-device-plugin --help".into()]);
    spec.host_paths = Some(HostPathsSpec {
        kubelet_root_dir: Some("/data/kubelet".into()),
        ..HostPathsSpec::default()
    });
    let ds = render(spec);
    let pod = pod(&ds);
    assert_eq!(
        pod.containers[0].args.as_deref(),
        Some(&["nvidia-device-plugin --help".to_owned()][..])
    );
    let sockets = pod
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == "device-plugin")
        .unwrap();
    assert_eq!(
        sockets.host_path.as_ref().unwrap().path,
        "/data/kubelet/device-plugins"
    );
}

#[test]
fn pods_run_with_the_runtime_class_or_ask_the_nri_plugin_for_the_management_device() {
    let ds = render(ClusterPolicySpec::default());
    assert_eq!(pod(&ds).runtime_class_name.as_deref(), Some("nvidia"));
    let ds = build(&Input {
        gpu_access: GpuAccess::NriAnnotation,
        ..crate::validate::for_tests(&ClusterPolicySpec::default())
    });
    assert_eq!(pod(&ds).runtime_class_name, None);
    let template = &ds.spec.as_ref().unwrap().template;
    let annotations = template
        .metadata
        .as_ref()
        .unwrap()
        .annotations
        .as_ref()
        .unwrap();
    assert_eq!(
        annotations["nvidia.cdi.k8s.io/container.nvidia-device-plugin"],
        "management.nvidia.com/gpu=all"
    );
}
