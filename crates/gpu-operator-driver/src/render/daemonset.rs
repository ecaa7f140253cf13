//! One driver DaemonSet per pool: `k8s-driver-manager` then `nvidia-driver-ctr` (plus the RDMA,
//! GDS and GDRCopy sidecars when enabled), host PID, one driver pod per node (anti-affinity on
//! `app.kubernetes.io/component=nvidia-driver`), always `OnDelete`. Every pool DaemonSet carries
//! the `app=nvidia-driver-daemonset` label, so NVIDIA's selectors find all driver pods.

use std::collections::BTreeMap;

use gpu_operator_api::labels::operand;
use gpu_operator_core::{
    build::{
        daemonset::Identity,
        host_paths, meta,
        pod::{self, Barrier, Finish, HostPaths, Wrap, host_path},
    },
    contract::Operand as _,
};
use k8s_openapi::{
    api::{
        apps::v1::DaemonSet,
        core::v1::{
            Affinity, ConfigMapVolumeSource, Container, LocalObjectReference, PodAffinityTerm,
            PodAntiAffinity, PodSpec, Volume,
        },
    },
    apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement},
};

use super::{
    config_mounts,
    containers::{self, DRIVER_CONTAINER, MANAGER_CONTAINER, set_env},
    sidecars,
};
use crate::{DAEMONSET, Driver, Input, Pool, SERVICE_ACCOUNT, STARTUP_PROBE_CONFIG_MAP, digest};

/// Label NVIDIA puts on driver DaemonSets and pods: `"true"` for precompiled ones.
pub const PRECOMPILED_LABEL: &str = "nvidia.com/precompiled";

/// The DaemonSet of `pool`.
pub fn build(input: &Input, pool: &Pool) -> DaemonSet {
    let mounts = config_mounts::build(&input.config, pool);
    let pod_containers = pod_containers(input, pool, &mounts);
    let mut volumes = volumes(input);
    for volume in mounts.volumes {
        if !volumes.iter().any(|v| v.name == volume.name) {
            volumes.push(volume);
        }
    }
    let pod = PodSpec {
        service_account_name: Some(SERVICE_ACCOUNT.to_owned()),
        host_pid: Some(true),
        node_selector: Some(pool.node_selector.clone()),
        affinity: Some(one_driver_per_node()),
        init_containers: Some(vec![containers::manager(input, &input.manager_image)]),
        containers: pod_containers,
        volumes: Some(volumes),
        ..PodSpec::default()
    };
    let steps = Finish {
        component: &input.component,
        // Every other operand waits on the driver; it waits on nothing.
        barrier: Barrier::None,
        // `hostPaths.rootFS` becomes `HOST_ROOT` below; its volumes are built from the spec.
        host_paths: HostPaths::ResolvedByOperand,
        // `driver.args` go to the driver container as it is built.
        args: None,
    };
    let mut finished = pod::finish(pod, steps);
    let pod = finished.pod_mut();
    apply_other_images(input, pod);
    let root = input.shared.root_fs();
    if root != host_paths::DEFAULT_ROOT_FS {
        for c in pod
            .init_containers
            .iter_mut()
            .flatten()
            .chain(&mut pod.containers)
        {
            set_env(c, "HOST_ROOT", root);
        }
    }
    let digest = digest::of(pod);
    for c in pod
        .init_containers
        .iter_mut()
        .flatten()
        .chain(&mut pod.containers)
    {
        if c.name == MANAGER_CONTAINER || c.name == DRIVER_CONTAINER {
            set_env(c, digest::ENV, &digest);
        }
    }
    let mut ds = finished.into_daemonset(Wrap {
        identity: Identity {
            name: DAEMONSET,
            component: Driver::NAME,
            deploy_label: operand::DRIVER,
            always_on_delete: true,
        },
        daemonsets: &input.shared.daemonsets,
        gpus: None,
    });
    name_and_label(&mut ds, pool);
    ds
}

/// The pool's name, NVIDIA's precompiled label and the pod's default container.
fn name_and_label(ds: &mut DaemonSet, pool: &Pool) {
    ds.metadata.name = Some(pool.name.clone());
    let precompiled = if pool.kernel.is_some() {
        "true"
    } else {
        "false"
    };
    ds.metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(PRECOMPILED_LABEL.to_owned(), precompiled.to_owned());
    if let Some(template) = ds.spec.as_mut().and_then(|s| s.template.metadata.as_mut()) {
        template
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(PRECOMPILED_LABEL.to_owned(), precompiled.to_owned());
        template
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(
                "kubectl.kubernetes.io/default-container".to_owned(),
                DRIVER_CONTAINER.to_owned(),
            );
    }
}

/// The driver container and the sidecars the spec enables.
fn pod_containers(input: &Input, pool: &Pool, mounts: &config_mounts::Mounts) -> Vec<Container> {
    let mut main = containers::driver(input, &pool.driver_image, mounts.driver.clone());
    main.env_from = Some(mounts.env_from.clone()).filter(|e| !e.is_empty());
    let mut pod_containers = vec![main];
    if input.rdma.enabled() {
        pod_containers.push(sidecars::peermem(
            input.rdma.host_mofed(),
            &pool.driver_image,
            mounts.peermem.clone(),
        ));
    }
    let modules = [
        (
            "nvidia-fs-ctr",
            "nvidia-gds-driver",
            "nvidia_fs",
            pool.gds_image.as_deref(),
            input.gds.as_ref().map(|g| g.env.as_slice()),
        ),
        (
            "nvidia-gdrcopy-ctr",
            "nvidia-gdrcopy-driver",
            "gdrdrv",
            pool.gdrcopy_image.as_deref(),
            input.gdrcopy.as_ref().map(|g| g.env.as_slice()),
        ),
    ];
    for (name, installer, module, image, env) in modules {
        if let Some(image) = image {
            let mut sidecar = sidecars::module(
                name,
                installer,
                module,
                image,
                env.unwrap_or_default(),
                mounts.sidecars.clone(),
            );
            sidecar.env_from = Some(mounts.env_from.clone()).filter(|e| !e.is_empty());
            pod_containers.push(sidecar);
        }
    }
    pod_containers
}

/// Pull policies and pull secrets of the images that are not the driver's: the manager's, GDS's
/// and GDRCopy's own settings where given.
fn apply_other_images(input: &Input, pod: &mut PodSpec) {
    let others = [
        (MANAGER_CONTAINER, Some(&input.manager_pull)),
        ("nvidia-fs-ctr", input.gds.as_ref().map(|g| &g.pull)),
        (
            "nvidia-gdrcopy-ctr",
            input.gdrcopy.as_ref().map(|g| &g.pull),
        ),
    ];
    for (name, pull) in others {
        let Some(pull) = pull else { continue };
        let present = pod
            .init_containers
            .iter_mut()
            .flatten()
            .chain(&mut pod.containers)
            .find(|c| c.name == name);
        let Some(container) = present else { continue };
        if let Some(policy) = pull.policy {
            container.image_pull_policy = Some(policy.to_owned());
        }
        let secrets = pod.image_pull_secrets.get_or_insert_with(Vec::new);
        for secret in &pull.secrets {
            if !secrets.iter().any(|s| &s.name == secret) {
                secrets.push(LocalObjectReference {
                    name: secret.clone(),
                });
            }
        }
    }
    if pod.image_pull_secrets.as_ref().is_some_and(Vec::is_empty) {
        pod.image_pull_secrets = None;
    }
}

/// At most one driver pod per node, whichever pool it comes from.
fn one_driver_per_node() -> Affinity {
    Affinity {
        pod_anti_affinity: Some(PodAntiAffinity {
            required_during_scheduling_ignored_during_execution: Some(vec![PodAffinityTerm {
                label_selector: Some(LabelSelector {
                    match_expressions: Some(vec![LabelSelectorRequirement {
                        key: meta::COMPONENT_LABEL.to_owned(),
                        operator: "In".to_owned(),
                        values: Some(vec![Driver::NAME.to_owned()]),
                    }]),
                    ..LabelSelector::default()
                }),
                topology_key: "kubernetes.io/hostname".to_owned(),
                ..PodAffinityTerm::default()
            }]),
            ..PodAntiAffinity::default()
        }),
        ..Affinity::default()
    }
}

/// The host paths the driver pod always mounts (with `hostPaths.rootFS` and the host MOFED
/// sources applied) and the startup probe script.
fn volumes(input: &Input) -> Vec<Volume> {
    let doc = Some("DirectoryOrCreate");
    let root = input.shared.root_fs();
    let ofed_src = if input.rdma.host_mofed() {
        "/usr/src"
    } else {
        "/run/mellanox/drivers/usr/src"
    };
    vec![
        host_path("run-nvidia", "/run/nvidia", doc),
        host_path("var-log", "/var/log", None),
        host_path("dev-log", "/dev/log", None),
        host_path("host-os-release", "/etc/os-release", None),
        host_path("run-nvidia-fabricmanager", "/run/nvidia-fabricmanager", doc),
        host_path("run-nvidia-topologyd", "/run/nvidia-topologyd", doc),
        host_path("mlnx-ofed-usr-src", ofed_src, doc),
        host_path("run-mellanox-drivers", "/run/mellanox/drivers", doc),
        host_path("run-nvidia-validations", "/run/nvidia/validations", doc),
        host_path("host-root", root, None),
        host_path("host-sys", "/sys", Some("Directory")),
        host_path(
            "firmware-search-path",
            "/sys/module/firmware_class/parameters/path",
            None,
        ),
        host_path(
            "host-sys-devices-system",
            "/sys/devices/system",
            Some("Directory"),
        ),
        host_path("nv-firmware", "/run/nvidia/driver/lib/firmware", doc),
        Volume {
            name: "driver-startup-probe-script".to_owned(),
            config_map: Some(ConfigMapVolumeSource {
                name: STARTUP_PROBE_CONFIG_MAP.to_owned(),
                default_mode: Some(0o755),
                ..ConfigMapVolumeSource::default()
            }),
            ..Volume::default()
        },
    ]
}

#[cfg(test)]
mod tests;
