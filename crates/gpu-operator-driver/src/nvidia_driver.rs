//! The driver of an NVIDIADriver (`nvidia.com/v1alpha1`): the same DaemonSets the ClusterPolicy's
//! driver renders, from the same [`Input`], for the GPU nodes the CR selects. Validation maps the
//! CR's driver sections onto the ClusterPolicy's (their Rust types are shared; the three whose
//! JSON differs are translated here) and resolves them with the driver's own rules, over the
//! shared pod settings (`daemonsets`, `hostPaths`, `validator`) of the active ClusterPolicy, then
//! adds what an NVIDIADriver changes ([`PerDriver`]): its nodes (those the node labeller labels
//! `nvidia.com/gpu-operator.driver.owner=<cr>`, as NVIDIA's DaemonSets select them, from its
//! `nodeSelector` and the conflicts and default of [`owners`]; and `nodeAffinity`), NVIDIA's per-CR names (`nvidia-<driverType>-driver-<cr>-<os>`,
//! `nvidia-vgpu-manager-<cr>-<os>`), a per-pool `app` label, its driver type and pod settings.
//! Only the DaemonSets: their ServiceAccount, RBAC and startup probe ConfigMap are the
//! ClusterPolicy's driver's, which renders them (and no DaemonSet) while NVIDIADrivers deploy the
//! drivers (the operator writes ClusterRoles under fixed names only, and an object has one
//! controller).
//!
//! By NVIDIA's rule an NVIDIADriver deploys nothing unless the active ClusterPolicy sets
//! `driver.useNvidiaDriverCRD: true` (and leaves the driver enabled); its condition says why.

pub mod owners;
mod render;

pub(crate) use render::apply;

use std::collections::BTreeMap;

use gpu_operator_api::{
    ClusterPolicySpec, NvidiaDriver, NvidiaDriverSpec, labels,
    nvidia_driver::DriverType,
    spec::{
        DriverLicensingConfigSpec, DriverRepoConfigSpec, DriverSpec, VirtualTopologyConfigSpec,
    },
};
use gpu_operator_core::{
    Error,
    cache::stores::Stores,
    contract::{Children, Cluster, ImageEnv, Operand, Warning},
};
use k8s_openapi::api::{
    apps::v1::DaemonSet,
    core::v1::{NodeAffinity, Pod, PodSecurityContext, Toleration},
};

use crate::{Driver, Input, Pool, in_sync, os_tag, sanitized_kernel, validate};

/// Longest object name (a DNS subdomain), to which NVIDIA cuts a DaemonSet's name.
const NAME_MAX: usize = 253;
/// Longest label value, to which NVIDIA cuts the `app` label.
const LABEL_MAX: usize = 63;

/// The driver operand of an NVIDIADriver.
pub struct NvidiaDriverOperand;

impl Operand for NvidiaDriverOperand {
    type Owner = NvidiaDriver;
    /// NVIDIA's `app.kubernetes.io/component` of every driver DaemonSet, as the ClusterPolicy's
    /// driver's: the driver pods' anti-affinity and NVIDIA's tooling select on it. Each
    /// NVIDIADriver prunes only its own objects of it.
    const NAME: &'static str = Driver::NAME;
    const CONDITION: &'static str = Driver::CONDITION;
    const SECTION: &'static str = "spec";
    type Input = Input;
    /// The driver's image variables: an NVIDIADriver's sections fall back on them alike.
    const IMAGES: &'static [ImageEnv] = <Driver as Operand>::IMAGES;

    fn validate(cr: &NvidiaDriver, cluster: &Cluster<'_>) -> Result<Option<Input>, Error> {
        validate(cr, cluster)
    }

    fn disabled_because(_cr: &NvidiaDriver, cluster: &Cluster<'_>) -> Option<String> {
        Some(
            match cluster.policy {
                None => {
                    "no ClusterPolicy: NVIDIADriver objects deploy drivers once a \
                         ClusterPolicy sets driver.useNvidiaDriverCRD: true; nothing deployed"
                }
                Some(policy) if !policy.driver_enabled() => {
                    "the ClusterPolicy sets driver.enabled: false; nothing deployed"
                }
                Some(_) => {
                    "the ClusterPolicy does not set driver.useNvidiaDriverCRD: true, so its own \
                     driver section deploys the drivers; nothing deployed"
                }
            }
            .to_owned(),
        )
    }

    /// When the active ClusterPolicy takes the drivers back (`driver.useNvidiaDriverCRD` unset or
    /// false, the driver enabled), this CR's driver pods keep running, the ClusterPolicy's new
    /// driver pod on their node waiting for them (one driver pod per node), until the upgrade
    /// replaces them.
    fn hands_over(_cr: &NvidiaDriver, cluster: &Cluster<'_>) -> bool {
        cluster
            .policy
            .is_some_and(|p| p.driver_enabled() && !validate::managed_by_nvidia_drivers(p))
    }

    /// Its nodes that another NVIDIADriver selects too, named with the others; two defaults.
    fn placement_warnings(
        cr: &NvidiaDriver,
        cluster: &Cluster<'_>,
        stores: &Stores,
    ) -> Vec<Warning> {
        if !handed_over(cluster.policy) {
            return Vec::new();
        }
        owners::warnings(cr, &owners::of_caches(stores))
    }

    fn render(input: &Input) -> Children {
        crate::render::children(input)
    }

    fn unserved(input: &Input) -> Option<String> {
        input.unserved.clone()
    }

    /// A driver pod of an older template that installs the same driver needs no replacement.
    const POD_IN_SYNC: Option<fn(&DaemonSet, &Pod) -> bool> = Some(in_sync::pod_in_sync);
}

/// What an NVIDIADriver adds to the driver's [`Input`].
#[derive(Clone, Debug, PartialEq)]
pub struct PerDriver {
    /// `driverType`.
    pub driver_type: DriverType,
    /// `nodeAffinity`, for every pod.
    pub node_affinity: Option<NodeAffinity>,
    /// `labels`, on every pod.
    pub labels: BTreeMap<String, String>,
    /// `annotations`, on every pod.
    pub annotations: BTreeMap<String, String>,
    /// `tolerations`, after the shared ones.
    pub tolerations: Vec<Toleration>,
    /// `priorityClassName`, over the shared one.
    pub priority_class_name: Option<String>,
    /// `podSecurityContext`, over the shared one.
    pub pod_security_context: Option<PodSecurityContext>,
    /// The `app` label (and selector) of each pool's DaemonSet, by DaemonSet name.
    pub apps: BTreeMap<String, String>,
}

/// Whether the active ClusterPolicy `policy` hands the drivers to NVIDIADriver objects.
pub fn handed_over(policy: Option<&ClusterPolicySpec>) -> bool {
    policy.is_some_and(|p| p.driver_enabled() && validate::managed_by_nvidia_drivers(p))
}

/// `Ok(None)` unless the active ClusterPolicy hands the drivers to NVIDIADriver objects.
pub fn validate(cr: &NvidiaDriver, cluster: &Cluster<'_>) -> Result<Option<Input>, Error> {
    let Some(policy) = cluster.policy else {
        return Ok(None);
    };
    if !policy.driver_enabled() || !validate::managed_by_nvidia_drivers(policy) {
        return Ok(None);
    }
    let spec = &cr.spec;
    let mut input = validate::resolve(&as_cluster_policy(spec, policy), cluster)?;
    let name = cr.metadata.name.clone().unwrap_or_default();
    // Only the OSes (and kernels) of its own nodes, as NVIDIA's: none before the labeller names
    // any node its.
    let served = cluster.facts.owner_pools.get(&name);
    input
        .pools
        .retain(|pool| served.is_some_and(|s| s.contains(&(pool.os.clone(), pool.kernel.clone()))));
    let uid = cr.metadata.uid.clone().unwrap_or_default();
    let mut apps = BTreeMap::new();
    for pool in &mut input.pools {
        pool.name = daemonset_name(spec.driver_type, &name, pool);
        pool.node_selector
            .insert(labels::DRIVER_OWNER.to_owned(), name.clone());
        apps.insert(pool.name.clone(), app_label(spec.driver_type, &uid, pool));
    }
    input.nvidia_driver = Some(PerDriver {
        driver_type: spec.driver_type,
        node_affinity: spec.node_affinity.clone(),
        labels: spec.labels.clone().unwrap_or_default(),
        annotations: spec.annotations.clone().unwrap_or_default(),
        tolerations: spec.tolerations.clone().unwrap_or_default(),
        priority_class_name: spec.priority_class_name.clone(),
        pod_security_context: spec.pod_security_context.clone(),
        apps,
    });
    Ok(Some(input))
}

/// The ClusterPolicy spec the driver resolves for `cr`: the active `policy`'s (its shared pod
/// settings) with `driver`, `gds` and `gdrcopy` taken from the CR.
fn as_cluster_policy(cr: &NvidiaDriverSpec, policy: &ClusterPolicySpec) -> ClusterPolicySpec {
    let mut spec = policy.clone();
    spec.driver = DriverSpec {
        enabled: Some(true),
        use_nvidia_driver_crd: None,
        use_precompiled: cr.use_precompiled,
        use_open_kernel_modules: cr.use_open_kernel_modules,
        kernel_module_type: cr.kernel_module_type,
        image: cr.image.clone(),
        container: cr.container.clone(),
        host_network: cr.host_network,
        startup_probe: cr.startup_probe.clone(),
        liveness_probe: cr.liveness_probe.clone(),
        readiness_probe: cr.readiness_probe.clone(),
        rdma: cr.rdma.clone(),
        upgrade_policy: cr.upgrade_policy.clone(),
        manager: cr.manager.clone(),
        repo_config: cr.repo_config.as_ref().map(|r| DriverRepoConfigSpec {
            config_map_name: r.name.clone(),
        }),
        cert_config: cr.cert_config.clone(),
        licensing_config: cr
            .licensing_config
            .as_ref()
            .map(|l| DriverLicensingConfigSpec {
                config_map_name: l.name.clone(),
                secret_name: l.secret_name.clone(),
                nls_enabled: l.nls_enabled,
            }),
        virtual_topology: cr
            .virtual_topology_config
            .as_ref()
            .map(|v| VirtualTopologyConfigSpec {
                config: v.name.clone(),
            }),
        kernel_module_config: cr.kernel_module_config.clone(),
        secret_env: cr.secret_env.clone(),
    };
    spec.gds.clone_from(&cr.gds);
    spec.gdrcopy.clone_from(&cr.gdrcopy);
    spec
}

/// NVIDIA's name of the DaemonSet of CR `name` for `pool`: `nvidia-<driverType>-driver-<cr>-<os
/// tag>` (`nvidia-vgpu-manager-<cr>-<os tag>` for the vGPU host manager), with the sanitized
/// kernel after it for a precompiled pool (NVIDIA's would give two kernels one name).
fn daemonset_name(driver_type: DriverType, name: &str, pool: &Pool) -> String {
    let os = os_tag(&pool.os);
    let mut text = match driver_type {
        DriverType::VgpuHostManager => format!("nvidia-vgpu-manager-{name}-{os}"),
        other => format!("nvidia-{}-driver-{name}-{os}", other.as_str()),
    };
    if let Some(kernel) = &pool.kernel {
        text = format!("{text}-{}", sanitized_kernel(kernel));
    }
    text.truncate(NAME_MAX);
    text
}

/// NVIDIA's `app` label of a pool's DaemonSet: `nvidia-<driverType>-driver-<os tag>-<hash>`, the
/// hash of the CR's uid (and the pool's kernel), the prefix cut to fit 63 characters.
fn app_label(driver_type: DriverType, uid: &str, pool: &Pool) -> String {
    let prefix = format!(
        "nvidia-{}-driver-{}",
        driver_type.as_str(),
        os_tag(&pool.os)
    );
    let key = match &pool.kernel {
        Some(kernel) => format!("{uid}-{kernel}"),
        None => uid.to_owned(),
    };
    let hash = safe_hash(&key);
    let room = LABEL_MAX.saturating_sub(hash.len() + 1);
    let prefix = prefix.get(..room).unwrap_or(&prefix).trim_end_matches('-');
    format!("{prefix}-{hash}")
}

/// FNV-1a (32 bits) of `text`, its decimal digits spelled in Kubernetes' safe alphabet (no
/// vowels, no look-alike digits), as NVIDIA hashes its app names.
fn safe_hash(text: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut hash: u32 = 0x811c_9dc5;
    for byte in text.bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash.to_string()
        .bytes()
        .map(|b| char::from(ALPHABET[usize::from(b) % ALPHABET.len()]))
        .collect()
}

#[cfg(test)]
mod tests;
