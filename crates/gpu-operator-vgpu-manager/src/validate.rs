//! Checks the ClusterPolicy for the vGPU manager and resolves what its pod needs: the vGPU host
//! driver image (`vgpuManager`, else `VGPU_MANAGER_IMAGE`) with the OS tag NVIDIA appends
//! (`<version>-ubuntu22.04`, as for the driver; not to a digest), the OS it is built for, the
//! k8s-driver-manager image (`vgpuManager.driverManager`, else `DRIVER_MANAGER_IMAGE`), and the
//! files of the `vgpuManager.kernelModuleConfig` ConfigMap. Pure.
//!
//! One DaemonSet serves one OS, as NVIDIA's ClusterPolicy does (it tags the image with the OS of
//! the first GPU node it lists): the OS the live DaemonSet already selects while `vm-vgpu` nodes
//! still run it (a new OS must not replace the host driver under running VMs), else the first OS
//! of the `vm-vgpu` nodes (of all GPU nodes while there is none). It selects that OS, so a `vm-vgpu` node of another OS gets no pod rather than a
//! host driver built for another OS; a warning says so, and the way out (NVIDIADriver objects of
//! `driverType: vgpu-host-manager`, one per OS, with `driver.useNvidiaDriverCRD`).

use std::collections::BTreeSet;

use gpu_operator_api::{
    ClusterPolicySpec,
    labels::{NFD_OS_RELEASE_ID, NFD_OS_RELEASE_VERSION_ID},
    spec::{EnvVar, WorkloadConfig},
};
use gpu_operator_core::{
    Error,
    build::{
        component::{Component, Pull},
        image,
        shared::Shared,
    },
    cache::facts::{ClusterFacts, OsRelease},
    contract::Cluster,
};

use crate::DAEMONSET;

/// The operator's fallback variable of the vGPU manager image.
pub const IMAGE_ENV: &str = "VGPU_MANAGER_IMAGE";
/// The operator's fallback variable of the driver manager image.
pub const MANAGER_IMAGE_ENV: &str = "DRIVER_MANAGER_IMAGE";

/// What rendering the vGPU manager needs.
#[derive(Clone, Debug)]
pub struct Input {
    /// The OS the DaemonSet serves and the host driver image built for it; `None` while no GPU
    /// node carries NFD's os-release labels (no image can be chosen: no DaemonSet).
    pub os: Option<ForOs>,
    /// Other OSes of the GPU nodes, which the DaemonSet does not serve (as `ubuntu24.04`).
    pub other_oses: Vec<String>,
    /// GPU nodes without NFD's os-release labels, said in a sentence.
    pub unserved: Option<String>,
    /// The k8s-driver-manager init container image.
    pub manager_image: String,
    /// `vgpuManager.driverManager`'s pull policy (when set) and pull secrets.
    pub manager_pull: Pull,
    /// `vgpuManager.driverManager.env`, which override the init container's variables by name.
    pub manager_env: Vec<EnvVar>,
    /// `vgpuManager.kernelModuleConfig.name` and the keys of that ConfigMap (sorted), each
    /// mounted as a file under `/drivers`.
    pub kernel_module_config: Option<(String, Vec<String>)>,
    /// The operator namespace (the binding's subject).
    pub namespace: String,
    /// `spec.vgpuManager`'s container settings.
    pub component: Component,
    /// The settings every operand pod shares.
    pub shared: Shared,
}

/// The OS one DaemonSet serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForOs {
    /// The OS, selected through NFD's os-release labels.
    pub os: OsRelease,
    /// The vGPU host driver image for it.
    pub image: String,
}

/// `Ok(None)` unless sandbox workloads and `vgpuManager.enabled` are both on (both default to
/// false), and when `driver.useNvidiaDriverCRD` hands the vGPU manager to NVIDIADriver objects;
/// an image that cannot be resolved, or a `kernelModuleConfig` ConfigMap that does not exist, is
/// an error naming the field.
pub fn validate(spec: &ClusterPolicySpec, cluster: &Cluster<'_>) -> Result<Option<Input>, Error> {
    let Some(section) = spec
        .vgpu_manager
        .as_ref()
        .filter(|_| spec.vgpu_manager_enabled() && !managed_by_nvidia_drivers(spec))
    else {
        return Ok(None);
    };
    let base = image::resolve(
        "vgpuManager",
        &section.image,
        IMAGE_ENV,
        (cluster.image_env)(IMAGE_ENV).as_deref(),
    )?;
    let manager = section.driver_manager.clone().unwrap_or_default();
    let manager_image = image::resolve(
        "vgpuManager.driverManager",
        &manager.image,
        MANAGER_IMAGE_ENV,
        (cluster.image_env)(MANAGER_IMAGE_ENV).as_deref(),
    )?;
    let kernel_module_config = section
        .kernel_module_config
        .as_ref()
        .and_then(|k| k.name.clone())
        .filter(|name| !name.is_empty())
        .map(|name| module_files(cluster, name))
        .transpose()?;
    let oses = VgpuNodeOses::of(spec, cluster.facts);
    let chosen = served_os(cluster.facts, &oses);
    let other_oses = oses
        .labelled
        .iter()
        .filter(|os| Some(*os) != chosen.as_ref())
        .map(image::os_tag)
        .collect();
    Ok(Some(Input {
        os: chosen.map(|os| ForOs {
            image: image::with_os_tag(&base, &image::os_tag(&os)),
            os,
        }),
        other_oses,
        unserved: (oses.without_os > 0).then(|| {
            format!(
                "{} vm-vgpu GPU node(s) lack NFD's {NFD_OS_RELEASE_ID} or VERSION_ID label, so no \
                 vGPU manager image can be chosen for them and they get no vGPU manager pod: run \
                 Node Feature Discovery on every GPU node",
                oses.without_os
            )
        }),
        manager_image,
        manager_pull: Pull::of(&manager.image),
        manager_env: manager.env.unwrap_or_default(),
        kernel_module_config,
        namespace: cluster.namespace.to_owned(),
        component: Component::of(&section.image, &section.container, section.host_network),
        shared: Shared::of(spec),
    }))
}

/// Whether `driver.useNvidiaDriverCRD` is true: NVIDIADriver objects deploy the vGPU manager
/// (`driverType: vgpu-host-manager`), and NVIDIA's ClusterPolicy skips `state-vgpu-manager`.
pub fn managed_by_nvidia_drivers(spec: &ClusterPolicySpec) -> bool {
    spec.driver.use_nvidia_driver_crd == Some(true)
}

/// The OSes of the `vm-vgpu` nodes (their label, or `sandboxWorkloads.defaultWorkload`).
struct VgpuNodeOses {
    /// The OSes of those that carry NFD's os-release labels.
    labelled: BTreeSet<OsRelease>,
    /// How many do not.
    without_os: usize,
}

impl VgpuNodeOses {
    fn of(spec: &ClusterPolicySpec, facts: &ClusterFacts) -> Self {
        let default = spec.sandbox_default_workload().unwrap_or_default();
        let mut oses = Self {
            labelled: BTreeSet::new(),
            without_os: 0,
        };
        for ((label, os), count) in &facts.gpu_nodes_by_workload_os {
            if WorkloadConfig::from_name(label).unwrap_or(default) != WorkloadConfig::VmVgpu {
                continue;
            }
            match os {
                Some(os) => {
                    oses.labelled.insert(os.clone());
                }
                None => oses.without_os += count,
            }
        }
        oses
    }
}

/// The OS the DaemonSet serves: the one the live DaemonSet selects while `vm-vgpu` nodes run it
/// (or, with no `vm-vgpu` node, any GPU node), else the first of theirs (of the GPU nodes'
/// without one, so the DaemonSet is ready for the first node given to vGPUs).
fn served_os(facts: &ClusterFacts, oses: &VgpuNodeOses) -> Option<OsRelease> {
    let candidates = if oses.labelled.is_empty() {
        &facts.os_releases
    } else {
        &oses.labelled
    };
    let live = facts.daemonsets.get(DAEMONSET).and_then(|live| {
        Some(OsRelease {
            id: live.node_selector.get(NFD_OS_RELEASE_ID)?.clone(),
            version_id: live.node_selector.get(NFD_OS_RELEASE_VERSION_ID)?.clone(),
        })
    });
    live.filter(|os| candidates.contains(os))
        .or_else(|| candidates.first().cloned())
}

/// The keys of ConfigMap `name` (NVIDIA mounts each at `/drivers/<key>`); an error naming the
/// field when the ConfigMap is not in the operator namespace.
fn module_files(cluster: &Cluster<'_>, name: String) -> Result<(String, Vec<String>), Error> {
    let Some(config_map) = (cluster.config_maps)(&name) else {
        return Err(Error::InvalidSpec(format!(
            "vgpuManager.kernelModuleConfig.name: ConfigMap {name} not found in namespace {}: \
             create it (one key per module, such as nvidia.conf) or unset the field",
            cluster.namespace
        )));
    };
    let keys = config_map
        .data
        .iter()
        .flatten()
        .map(|(key, _)| key.clone())
        .collect();
    Ok((name, keys))
}

#[cfg(test)]
pub(crate) mod tests;
