//! One test per NVIDIA rule of the exporter DaemonSet.

use gpu_operator_api::{
    ClusterPolicySpec,
    spec::{DcgmExporterConfig, EnvVar, HostPathsSpec, HpcJobMappingConfig},
};
use gpu_operator_core::build::runtime_class::GpuAccess;

use crate::validate::JOB_MAPPING_DIR;

use super::*;

fn render_as(spec: &ClusterPolicySpec, form: Form) -> PodSpec {
    let ds = build(&Input::new(
        spec,
        "nvcr.io/nvidia/k8s/dcgm-exporter:4".into(),
        form,
        "gpu-operator".into(),
    ));
    ds.spec.unwrap().template.spec.unwrap()
}

fn render(spec: &ClusterPolicySpec) -> PodSpec {
    let form = Form::ClusterPolicy {
        validator_image: "v:1".into(),
        gpu_access: GpuAccess::RuntimeClass("nvidia".into()),
    };
    render_as(spec, form)
}

fn env(pod: &PodSpec, name: &str) -> Option<String> {
    pod.containers[0]
        .env
        .as_ref()
        .unwrap()
        .iter()
        .find(|e| e.name == name)
        .map(|e| e.value.clone().unwrap_or_default())
}

#[test]
fn defaults_listen_on_9400_with_the_images_metrics_behind_the_toolkit_barrier() {
    let pod = render(&ClusterPolicySpec::default());
    assert_eq!(env(&pod, "DCGM_EXPORTER_LISTEN").as_deref(), Some(":9400"));
    assert_eq!(
        env(&pod, "DCGM_EXPORTER_COLLECTORS").as_deref(),
        Some(DEFAULT_COLLECTORS)
    );
    assert_eq!(pod.automount_service_account_token, Some(false));
    assert_eq!(pod.host_pid, None);
    assert_eq!(pod.init_containers.unwrap()[0].name, "toolkit-validation");
    assert_eq!(
        pod.node_selector.unwrap()["nvidia.com/gpu.deploy.dcgm-exporter"],
        "true"
    );
}

#[test]
fn the_remote_host_engine_is_used_only_while_dcgm_runs() {
    let pod = render(&ClusterPolicySpec::default());
    assert_eq!(
        env(&pod, REMOTE_ENGINE_ENV).as_deref(),
        Some("nvidia-dcgm:5555")
    );
    let mut spec = ClusterPolicySpec::default();
    spec.dcgm.enabled = Some(false);
    assert_eq!(env(&render(&spec), REMOTE_ENGINE_ENV), None);
}

#[test]
fn a_localhost_engine_forces_host_networking() {
    let mut spec = ClusterPolicySpec::default();
    spec.dcgm.enabled = Some(false);
    spec.dcgm_exporter.container.env = Some(vec![EnvVar::new(REMOTE_ENGINE_ENV, "localhost:5555")]);
    let pod = render(&spec);
    assert_eq!(pod.host_network, Some(true));
    assert_eq!(pod.dns_policy.as_deref(), Some("ClusterFirstWithHostNet"));
}

#[test]
fn host_pid_and_host_network_switches() {
    let mut spec = ClusterPolicySpec::default();
    spec.dcgm_exporter.host_pid = Some(true);
    spec.dcgm_exporter.host_network = Some(true);
    let pod = render(&spec);
    assert_eq!((pod.host_pid, pod.host_network), (Some(true), Some(true)));
}

#[test]
fn a_custom_metrics_config_map_is_mounted_and_collected() {
    let mut spec = ClusterPolicySpec::default();
    spec.dcgm_exporter.config = Some(DcgmExporterConfig {
        name: Some("my-metrics".into()),
    });
    let pod = render(&spec);
    assert_eq!(
        env(&pod, "DCGM_EXPORTER_COLLECTORS").as_deref(),
        Some(METRICS_PATH)
    );
    let volume = pod
        .volumes
        .unwrap()
        .into_iter()
        .find(|v| v.name == "metrics-config")
        .unwrap();
    assert_eq!(volume.config_map.unwrap().name, "my-metrics");
    let mount = pod.containers[0]
        .volume_mounts
        .clone()
        .unwrap()
        .into_iter()
        .find(|m| m.name == "metrics-config")
        .unwrap();
    assert_eq!(
        (mount.mount_path.as_str(), mount.sub_path.as_deref()),
        (METRICS_PATH, Some(METRICS_FILE))
    );
}

#[test]
fn pod_enrichment_sets_env_and_mounts_the_token() {
    let mut spec = ClusterPolicySpec::default();
    spec.dcgm_exporter.enable_pod_labels = Some(true);
    spec.dcgm_exporter.pod_label_allowlist_regex = Some(vec!["^team$".into(), "^app".into()]);
    let pod = render(&spec);
    assert_eq!(env(&pod, POD_LABELS_ENV).as_deref(), Some("true"));
    assert_eq!(
        env(&pod, "DCGM_EXPORTER_KUBERNETES_POD_LABEL_ALLOWLIST_REGEX").as_deref(),
        Some("^team$,^app")
    );
    assert_eq!(pod.automount_service_account_token, Some(true));
}

#[test]
fn hpc_job_mapping_and_kubelet_root_move_host_paths() {
    let mut spec = ClusterPolicySpec::default();
    spec.dcgm_exporter.hpc_job_mapping = Some(HpcJobMappingConfig {
        enabled: Some(true),
        directory: None,
    });
    spec.host_paths = Some(HostPathsSpec {
        kubelet_root_dir: Some("/data/kubelet".into()),
        ..HostPathsSpec::default()
    });
    let pod = render(&spec);
    assert_eq!(
        env(&pod, "DCGM_HPC_JOB_MAPPING_DIR").as_deref(),
        Some(JOB_MAPPING_DIR)
    );
    let paths: Vec<String> = pod
        .volumes
        .unwrap()
        .into_iter()
        .filter_map(|v| v.host_path.map(|h| h.path))
        .collect();
    assert!(
        paths.contains(&"/data/kubelet/pod-resources".to_owned()),
        "{paths:?}"
    );
    assert!(paths.contains(&JOB_MAPPING_DIR.to_owned()), "{paths:?}");
}

#[test]
fn user_env_wins_by_name_and_args_replace() {
    let mut spec = ClusterPolicySpec::default();
    spec.dcgm_exporter.container.env = Some(vec![EnvVar::new("DCGM_EXPORTER_LISTEN", ":9500")]);
    spec.dcgm_exporter.container.args = Some(vec!["-f".into()]);
    let pod = render(&spec);
    assert_eq!(env(&pod, "DCGM_EXPORTER_LISTEN").as_deref(), Some(":9500"));
    assert_eq!(
        pod.containers[0].args.as_deref(),
        Some(&["-f".to_owned()][..])
    );
}

#[test]
fn the_gpu_clusters_exporter_holds_the_admin_claim_and_resolves_dra_devices() {
    let mut spec = ClusterPolicySpec::default();
    spec.dcgm.enabled = Some(true);
    let pod = render_as(&spec, Form::GpuCluster);
    assert_eq!(
        pod.node_selector.as_ref().unwrap()["nvidia.com/gpu.deploy.dcgm-exporter-dra"],
        "true"
    );
    assert_eq!(
        (
            pod.init_containers.as_ref(),
            pod.runtime_class_name.as_ref()
        ),
        (None, None)
    );
    assert_eq!(env(&pod, ENABLE_DRA_ENV).as_deref(), Some("true"));
    assert_eq!(
        env(&pod, REMOTE_ENGINE_ENV).as_deref(),
        Some("nvidia-dcgm-dra:5555")
    );
    assert_eq!(pod.automount_service_account_token, Some(true));
    let main = &pod.containers[0];
    assert_eq!(main.name, "nvidia-dcgm-exporter-dra");
    assert_eq!(
        main.resources.as_ref().unwrap().claims.as_ref().unwrap()[0].name,
        "admin-gpus"
    );
    assert_eq!(
        pod.resource_claims.unwrap()[0]
            .resource_claim_template_name
            .as_deref(),
        Some("nvidia-dcgm-exporter-admin")
    );
}
