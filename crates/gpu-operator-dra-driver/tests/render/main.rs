//! The DRA operands rendered for NVIDIA's golden cases (`internal/state/testdata/golden/
//! gpucluster-dra-*.yaml` of NVIDIA's v26.7 operator): the default spec, `gpus` only
//! (`computeDomains` off), passthrough support, the full spec (env, resources, health check,
//! feature gates, host paths, `daemonsets`), and the DRA validator; each compares what matters
//! with NVIDIA's files (names, kinds, selectors, env, probes, mounts).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::missing_panics_doc,
    clippy::too_many_lines
)]

mod driver;
mod others;

use gpu_operator_api::{GpuCluster, GpuClusterSpec};
use gpu_operator_core::{
    cache::{facts::ClusterFacts, server_facts::ServerFacts},
    contract::{Children, Cluster, Operand},
    fixtures,
};
use gpu_operator_dra_driver::{DraDriver, DraValidator};
use k8s_openapi::api::{
    apps::v1::DaemonSet,
    core::v1::{Container, PodSpec},
};

/// NVIDIA's sample GPUCluster of its golden tests, as our spec.
pub fn nvidia_sample() -> serde_json::Value {
    serde_json::json!({
        "draDriver": {
            "repository": "nvcr.io/nvidia", "image": "k8s-dra-driver-gpu", "version": "v0.1.0",
            "imagePullPolicy": "IfNotPresent",
            "featureGates": {"MPSSupport": true, "AdminAccess": false}
        },
        "daemonsets": {
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "priorityClassName": "system-node-critical"
        },
        "hostPaths": {"driverInstallDir": "/run/nvidia/driver", "kubeletRootDir": "/var/lib/kubelet"}
    })
}

/// The GPUCluster of `spec`.
pub fn cluster_of(spec: serde_json::Value) -> GpuCluster {
    let spec: GpuClusterSpec = serde_json::from_value(spec).unwrap();
    GpuCluster::new("gpu-cluster", spec)
}

/// Operand `O` rendered for `spec` in namespace `test-operator` (NVIDIA's tests' namespace).
pub fn render<O: Operand<Owner = GpuCluster>>(spec: serde_json::Value) -> Children {
    let facts = ClusterFacts::default();
    let cluster = Cluster {
        namespace: "test-operator",
        facts: &facts,
        image_env: &fixtures::image_env,
        config_maps: &fixtures::plugin_configs,
        policy: None,
        server: ServerFacts::unknown(),
    };
    O::render(&O::validate(&cluster_of(spec), &cluster).unwrap().unwrap())
}

/// The DRA driver's objects for `spec`.
pub fn driver(spec: serde_json::Value) -> Children {
    render::<DraDriver>(spec)
}

/// The DRA validator's objects for `spec`.
pub fn validator(spec: serde_json::Value) -> Children {
    render::<DraValidator>(spec)
}

/// The pod of a DaemonSet.
pub fn pod(ds: &DaemonSet) -> &PodSpec {
    ds.spec.as_ref().unwrap().template.spec.as_ref().unwrap()
}

/// The container or init container `name` of `pod`.
pub fn container<'a>(pod: &'a PodSpec, name: &str) -> &'a Container {
    pod.containers
        .iter()
        .chain(pod.init_containers.iter().flatten())
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no container {name}"))
}

/// A container's env as `(name, value)`, a downward-API variable as `<field path>`.
pub fn env(container: &Container) -> Vec<(String, String)> {
    container
        .env
        .iter()
        .flatten()
        .map(|e| {
            let value = match &e.value_from {
                Some(from) => format!("<{}>", from.field_ref.as_ref().unwrap().field_path),
                None => e.value.clone().unwrap_or_default(),
            };
            (e.name.clone(), value)
        })
        .collect()
}

/// The value of variable `name` of `container` (as [`env`] writes it).
pub fn env_value(container: &Container, name: &str) -> Option<String> {
    env(container)
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v)
}

/// A container's mounts as `(volume, path, propagation, read-only)`.
pub fn mounts(container: &Container) -> Vec<(String, String, Option<String>, bool)> {
    container
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| {
            (
                m.name.clone(),
                m.mount_path.clone(),
                m.mount_propagation.clone(),
                m.read_only == Some(true),
            )
        })
        .collect()
}

/// The pod's host-path volumes as `(name, path, type)`.
pub fn volumes(pod: &PodSpec) -> Vec<(String, String, Option<String>)> {
    pod.volumes
        .iter()
        .flatten()
        .map(|v| {
            let host = v.host_path.as_ref().unwrap();
            (v.name.clone(), host.path.clone(), host.type_.clone())
        })
        .collect()
}

/// The names of `objects`.
pub fn names<T: kube_name::Named>(objects: &[T]) -> Vec<String> {
    objects.iter().map(kube_name::Named::name).collect()
}

/// Names of k8s-openapi objects, without a kube dependency.
pub mod kube_name {
    use k8s_openapi::Metadata;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    /// An object with a name.
    pub trait Named {
        /// Its name.
        fn name(&self) -> String;
    }

    impl<T: Metadata<Ty = ObjectMeta>> Named for T {
        fn name(&self) -> String {
            self.metadata().name.clone().unwrap_or_default()
        }
    }
}
