//! The in-sync predicate against hand-written driver pods: what must and must not trigger an
//! upgrade.

use k8s_openapi::{
    api::{
        apps::v1::{DaemonSet, DaemonSetSpec},
        core::v1::{
            Container, EnvVar, HostPathVolumeSource, Pod, PodSpec, PodTemplateSpec, Toleration,
            Volume, VolumeMount,
        },
    },
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};

use super::*;

fn env(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: Some(value.into()),
        ..EnvVar::default()
    }
}

/// A driver pod spec as NVIDIA's and our templates have it, reduced to what matters here.
fn spec(image: &str) -> PodSpec {
    PodSpec {
        init_containers: Some(vec![Container {
            name: "k8s-driver-manager".into(),
            image: Some("nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.8.1".into()),
            ..Container::default()
        }]),
        containers: vec![Container {
            name: "nvidia-driver-ctr".into(),
            image: Some(image.into()),
            command: Some(vec!["nvidia-driver".into()]),
            args: Some(vec!["init".into()]),
            env: Some(vec![
                env("KERNEL_MODULE_TYPE", "auto"),
                env("DRIVER_CONFIG_DIGEST", "0123456789abcdef"),
            ]),
            volume_mounts: Some(vec![VolumeMount {
                name: "run-nvidia".into(),
                mount_path: "/run/nvidia".into(),
                mount_propagation: Some("Bidirectional".into()),
                ..VolumeMount::default()
            }]),
            ..Container::default()
        }],
        volumes: Some(vec![Volume {
            name: "run-nvidia".into(),
            host_path: Some(HostPathVolumeSource {
                path: "/run/nvidia".into(),
                type_: Some("DirectoryOrCreate".into()),
            }),
            ..Volume::default()
        }]),
        ..PodSpec::default()
    }
}

fn daemonset(generation: i64, template: PodSpec) -> DaemonSet {
    DaemonSet {
        metadata: ObjectMeta {
            generation: Some(generation),
            ..ObjectMeta::default()
        },
        spec: Some(DaemonSetSpec {
            template: PodTemplateSpec {
                spec: Some(template),
                ..PodTemplateSpec::default()
            },
            ..DaemonSetSpec::default()
        }),
        ..DaemonSet::default()
    }
}

fn pod(generation: i64, spec: PodSpec) -> Pod {
    Pod {
        metadata: ObjectMeta {
            labels: Some([(TEMPLATE_GENERATION_LABEL.to_owned(), generation.to_string())].into()),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        ..Pod::default()
    }
}

const R570: &str = "nvcr.io/nvidia/driver:570.172.08-ubuntu22.04";
const R580: &str = "nvcr.io/nvidia/driver:580.95.05-ubuntu22.04";

#[test]
fn a_new_driver_version_is_out_of_sync() {
    assert!(!pod_in_sync(&daemonset(2, spec(R580)), &pod(1, spec(R570))));
}

#[test]
fn a_pod_of_the_current_template_is_in_sync_even_if_a_webhook_rewrote_it() {
    let pinned = "nvcr.io/nvidia/driver@sha256:0000000000000000000000000000000000000000000000000000000000000000";
    assert!(pod_in_sync(
        &daemonset(2, spec(R580)),
        &pod(2, spec(pinned))
    ));
}

#[test]
fn cosmetic_template_changes_keep_the_pod_in_sync() {
    // An adopted pod of NVIDIA's template, or ours before a chart-label, toleration, manager or
    // volume-name change: another revision, the same installation.
    let mut desired = spec(R570);
    desired.tolerations = Some(vec![Toleration {
        key: Some("nvidia.com/gpu".into()),
        operator: Some("Exists".into()),
        ..Toleration::default()
    }]);
    desired.priority_class_name = Some("system-node-critical".into());
    desired.init_containers.as_mut().unwrap()[0].image =
        Some("nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.9.0".into());
    let volume = &mut desired.volumes.as_mut().unwrap()[0];
    volume.name = "run-nvidia-dir".into();
    desired.containers[0].volume_mounts.as_mut().unwrap()[0].name = "run-nvidia-dir".into();
    // Its digest differs too: it is a hash of the very fields compared, so it is not compared.
    desired.containers[0].env.as_mut().unwrap()[1] =
        env("DRIVER_CONFIG_DIGEST", "fedcba9876543210");
    assert!(pod_in_sync(&daemonset(7, desired), &pod(3, spec(R570))));
}

#[test]
fn an_env_or_args_change_is_out_of_sync() {
    let mut desired = spec(R570);
    desired.containers[0].env.as_mut().unwrap()[0] = env("KERNEL_MODULE_TYPE", "open");
    assert!(!pod_in_sync(&daemonset(2, desired), &pod(1, spec(R570))));
    let mut desired = spec(R570);
    desired.containers[0].args = Some(vec!["init".into(), "--debug".into()]);
    assert!(!pod_in_sync(&daemonset(2, desired), &pod(1, spec(R570))));
}

#[test]
fn a_mount_from_another_host_path_is_out_of_sync() {
    let mut desired = spec(R570);
    desired.volumes.as_mut().unwrap()[0]
        .host_path
        .as_mut()
        .unwrap()
        .path = "/var/run/nvidia".into();
    assert!(!pod_in_sync(&daemonset(2, desired), &pod(1, spec(R570))));
}

#[test]
fn a_new_sidecar_is_out_of_sync() {
    // rdma.enabled adds nvidia-peermem-ctr, which loads a kernel module.
    let mut desired = spec(R570);
    desired.containers.push(Container {
        name: "nvidia-peermem-ctr".into(),
        image: Some(R570.into()),
        ..Container::default()
    });
    assert!(!pod_in_sync(&daemonset(2, desired), &pod(1, spec(R570))));
}
