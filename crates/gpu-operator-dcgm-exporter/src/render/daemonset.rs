//! DaemonSet `nvidia-dcgm-exporter`: the exporter on port 9400 behind the toolkit barrier, with
//! NVIDIA's switches: the remote host engine `nvidia-dcgm:5555` when DCGM runs (host networking
//! when the user points it at `localhost`), `hostPID`, `hostNetwork`, a custom metrics ConfigMap,
//! HPC job mapping, pod-label enrichment (which mounts the ServiceAccount token) and the kubelet
//! pod-resources socket under `hostPaths.kubeletRootDir`. The GPUCluster's,
//! `nvidia-dcgm-exporter-dra`, starts at once, reaches the GPUs through its admin-access claim
//! instead of the NVIDIA runtime, its host engine at `nvidia-dcgm-dra:5555`, and resolves DRA
//! devices (`KUBERNETES_ENABLE_DRA`).

use gpu_operator_core::build::{
    admin_claim,
    daemonset::{self, Identity},
    pod::{self, Barrier, Finish, Gpus, Wrap, host_path, read_only_mount},
};
use k8s_openapi::{
    api::{
        apps::v1::DaemonSet,
        core::v1::{
            ConfigMapVolumeSource, Container, ContainerPort, EnvVar, HTTPGetAction, KeyToPath,
            PodSpec, Probe, Volume, VolumeMount,
        },
    },
    apimachinery::pkg::util::intstr::IntOrString,
};

use crate::{
    ADMIN_CLAIM_TEMPLATE, ENABLE_DRA_ENV, Form, Input, PORT,
    validate::{POD_LABELS_ENV, POD_UID_ENV, REMOTE_ENGINE_ENV},
};

/// Metrics list of the exporter image, used unless `dcgmExporter.config.name` names another.
const DEFAULT_COLLECTORS: &str = "/etc/dcgm-exporter/dcp-metrics-included.csv";
/// Key of the custom metrics ConfigMap, and the file it is mounted as.
const METRICS_FILE: &str = "dcgm-metrics.csv";
/// Where the custom metrics list is mounted.
const METRICS_PATH: &str = "/etc/dcgm-exporter/dcgm-metrics.csv";
/// The standalone host engine's port (the `nvidia-dcgm` and `nvidia-dcgm-dra` operands).
const DCGM_PORT: i32 = 5555;

/// The exporter container's env, mounts and the pod's volumes, before the user's env.
struct Parts {
    env: Vec<EnvVar>,
    mounts: Vec<VolumeMount>,
    volumes: Vec<Volume>,
}

fn parts(input: &Input) -> Parts {
    let mut volumes = vec![host_path(
        "pod-gpu-resources",
        "/var/lib/kubelet/pod-resources",
        None,
    )];
    let mut mounts = vec![read_only_mount(
        "pod-gpu-resources",
        "/var/lib/kubelet/pod-resources",
    )];
    let mut env = vec![
        literal("DCGM_EXPORTER_LISTEN", &format!(":{PORT}")),
        literal("DCGM_EXPORTER_KUBERNETES", "true"),
        literal("DCGM_EXPORTER_COLLECTORS", DEFAULT_COLLECTORS),
        daemonset::field_env("NODE_NAME", "spec.nodeName"),
    ];
    if input.remote_engine {
        let service = input.form.host_engine_service();
        env.push(literal(
            REMOTE_ENGINE_ENV,
            &format!("{service}:{DCGM_PORT}"),
        ));
    }
    if let Some(dir) = &input.job_mapping_dir {
        env.push(literal("DCGM_HPC_JOB_MAPPING_DIR", dir));
        mounts.push(read_only_mount("hpc-job-mapping", dir));
        volumes.push(host_path("hpc-job-mapping", dir, Some("DirectoryOrCreate")));
    }
    if input.form.is_dra() {
        env.push(literal(ENABLE_DRA_ENV, "true"));
    }
    let enrichment = &input.enrichment;
    if enrichment.labels {
        env.push(literal(POD_LABELS_ENV, "true"));
    }
    if enrichment.uid {
        env.push(literal(POD_UID_ENV, "true"));
    }
    if !enrichment.label_allowlist.is_empty() {
        env.push(literal(
            "DCGM_EXPORTER_KUBERNETES_POD_LABEL_ALLOWLIST_REGEX",
            &enrichment.label_allowlist.join(","),
        ));
    }
    if let Some(config) = &input.metrics_config {
        set(&mut env, "DCGM_EXPORTER_COLLECTORS", METRICS_PATH);
        mounts.push(VolumeMount {
            sub_path: Some(METRICS_FILE.to_owned()),
            ..read_only_mount("metrics-config", METRICS_PATH)
        });
        volumes.push(Volume {
            name: "metrics-config".to_owned(),
            config_map: Some(ConfigMapVolumeSource {
                name: config.to_owned(),
                items: Some(vec![KeyToPath {
                    key: METRICS_FILE.to_owned(),
                    path: METRICS_FILE.to_owned(),
                    mode: None,
                }]),
                ..ConfigMapVolumeSource::default()
            }),
            ..Volume::default()
        });
    }
    Parts {
        env,
        mounts,
        volumes,
    }
}

/// The DaemonSet.
pub fn build(input: &Input) -> DaemonSet {
    let Parts {
        env,
        mounts,
        volumes,
    } = parts(input);
    let probe = |period: Option<i32>| Probe {
        http_get: Some(HTTPGetAction {
            port: IntOrString::Int(PORT),
            path: Some("/health".to_owned()),
            ..HTTPGetAction::default()
        }),
        initial_delay_seconds: Some(45),
        period_seconds: period,
        ..Probe::default()
    };
    let form = &input.form;
    let name = form.name();
    let pod = PodSpec {
        service_account_name: Some(name.to_owned()),
        automount_service_account_token: Some(input.uses_api()),
        host_pid: input.host_pid.then_some(true),
        containers: vec![Container {
            name: name.to_owned(),
            image: Some(input.image.clone()),
            env: Some(daemonset::override_env(env, &input.component.env)),
            ports: Some(vec![ContainerPort {
                name: Some("metrics".to_owned()),
                container_port: PORT,
                ..ContainerPort::default()
            }]),
            liveness_probe: Some(probe(Some(5))),
            readiness_probe: Some(probe(None)),
            security_context: Some(pod::privileged()),
            volume_mounts: Some(mounts),
            ..Container::default()
        }],
        volumes: Some(volumes),
        ..PodSpec::default()
    };
    let (barrier, gpus) = match form {
        Form::ClusterPolicy {
            validator_image,
            gpu_access,
        } => (
            input.shared.after_toolkit(validator_image),
            Some(Gpus {
                access: gpu_access,
                container: name,
            }),
        ),
        Form::GpuCluster => (Barrier::None, None),
    };
    let steps = Finish {
        component: &input.component,
        barrier,
        host_paths: input.shared.rewrite_host_paths(),
        args: Some(name),
    };
    let mut finished = pod::finish(pod, steps);
    if form.is_dra() {
        admin_claim::hold(finished.pod_mut(), name, ADMIN_CLAIM_TEMPLATE);
    }
    let mut ds = finished.into_daemonset(Wrap {
        identity: Identity {
            name,
            component: form.component(),
            deploy_label: form.deploy_label(),
            always_on_delete: false,
        },
        daemonsets: &input.shared.daemonsets,
        gpus,
    });
    let extra = &input.pod_annotations;
    if !extra.is_empty()
        && let Some(template) = ds.spec.as_mut().and_then(|s| s.template.metadata.as_mut())
    {
        template
            .annotations
            .get_or_insert_with(Default::default)
            .extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    ds
}

fn literal(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value: Some(value.to_owned()),
        value_from: None,
    }
}

fn set(env: &mut [EnvVar], name: &str, value: &str) {
    for e in env.iter_mut().filter(|e| e.name == name) {
        e.value = Some(value.to_owned());
    }
}

#[cfg(test)]
mod tests;
