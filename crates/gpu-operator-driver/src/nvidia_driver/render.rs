//! What an NVIDIADriver changes in the driver's pool DaemonSets ([`super::PerDriver`]): each
//! one's `app` label and selector, the CR's nodes and pod settings,
//! and for the vGPU host manager (`driverType: vgpu-host-manager`) NVIDIA's differences: nodes
//! labelled `nvidia.com/gpu.deploy.vgpu-manager=true`, no startup probe, the host's cgroups and
//! VFIO devices mounted, two minutes to stop.

use std::collections::BTreeMap;

use gpu_operator_api::{
    labels::{APP, APP_NAME, GPU_DEPLOY_PREFIX, operand},
    nvidia_driver::DriverType,
};
use k8s_openapi::api::{
    apps::v1::DaemonSet,
    core::v1::{Affinity, HostPathVolumeSource, PodSpec, Volume, VolumeMount},
};

use super::PerDriver;

/// How long a vGPU host manager pod may take to stop, as NVIDIA gives it.
const VGPU_MANAGER_GRACE_SECONDS: i64 = 120;

/// Applies `per` to the driver's pool DaemonSets.
pub fn apply(daemonsets: &mut [DaemonSet], per: &PerDriver) {
    for ds in daemonsets {
        daemonset(ds, per);
    }
}

/// One pool's DaemonSet.
fn daemonset(ds: &mut DaemonSet, per: &PerDriver) {
    let app = ds
        .metadata
        .name
        .as_ref()
        .and_then(|name| per.apps.get(name))
        .cloned();
    if let Some(app) = &app {
        relabel(ds.metadata.labels.get_or_insert_with(BTreeMap::new), app);
    }
    let Some(spec) = ds.spec.as_mut() else { return };
    if let Some(app) = &app {
        relabel(
            spec.selector.match_labels.get_or_insert_with(BTreeMap::new),
            app,
        );
    }
    if let Some(meta) = spec.template.metadata.as_mut() {
        let labels = meta.labels.get_or_insert_with(BTreeMap::new);
        if let Some(app) = &app {
            relabel(labels, app);
        }
        for (key, value) in &per.labels {
            labels.entry(key.clone()).or_insert_with(|| value.clone());
        }
        if !per.annotations.is_empty() {
            let annotations = meta.annotations.get_or_insert_with(BTreeMap::new);
            for (key, value) in &per.annotations {
                annotations.insert(key.clone(), value.clone());
            }
        }
    }
    let Some(pod) = spec.template.spec.as_mut() else {
        return;
    };
    if let Some(affinity) = &per.node_affinity {
        pod.affinity
            .get_or_insert_with(Affinity::default)
            .node_affinity = Some(affinity.clone());
    }
    if !per.tolerations.is_empty() {
        pod.tolerations
            .get_or_insert_with(Vec::new)
            .extend(per.tolerations.iter().cloned());
    }
    if let Some(class) = &per.priority_class_name {
        pod.priority_class_name = Some(class.clone());
    }
    if let Some(context) = &per.pod_security_context {
        pod.security_context = Some(context.clone());
    }
    if per.driver_type == DriverType::VgpuHostManager {
        vgpu_host_manager(pod);
    }
}

/// `app` and `app.kubernetes.io/name` set to `app`.
fn relabel(labels: &mut BTreeMap<String, String>, app: &str) {
    for key in [APP, APP_NAME] {
        if key == APP || labels.contains_key(key) {
            labels.insert(key.to_owned(), app.to_owned());
        }
    }
}

/// NVIDIA's differences of the vGPU host manager's pod.
fn vgpu_host_manager(pod: &mut PodSpec) {
    if let Some(selector) = pod.node_selector.as_mut() {
        selector.remove(&format!("{GPU_DEPLOY_PREFIX}{}", operand::DRIVER));
        selector.insert(
            format!("{GPU_DEPLOY_PREFIX}{}", operand::VGPU_MANAGER),
            "true".to_owned(),
        );
    }
    pod.termination_grace_period_seconds = Some(VGPU_MANAGER_GRACE_SECONDS);
    let host = [("cgroup", "/sys/fs/cgroup"), ("vfio", "/dev/vfio")];
    if let Some(driver) = pod
        .containers
        .iter_mut()
        .find(|c| c.name == crate::render::DRIVER_CONTAINER)
    {
        driver.startup_probe = None;
        let mounts = driver.volume_mounts.get_or_insert_with(Vec::new);
        for (name, path) in host {
            mounts.push(VolumeMount {
                name: name.to_owned(),
                mount_path: path.to_owned(),
                ..VolumeMount::default()
            });
        }
    }
    let volumes = pod.volumes.get_or_insert_with(Vec::new);
    for (name, path) in host {
        volumes.push(Volume {
            name: name.to_owned(),
            host_path: Some(HostPathVolumeSource {
                path: path.to_owned(),
                type_: None,
            }),
            ..Volume::default()
        });
    }
}
