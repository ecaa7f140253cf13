//! ClusterPolicy (`nvidia.com/v1`), NVIDIADriver and GPUCluster (`nvidia.com/v1alpha1`) types and the names
//! shared across the operator. Pure data.
//!
//! [`ClusterPolicy`] and [`NvidiaDriver`] have the same JSON fields, enums, defaults and required
//! fields as NVIDIA's CRDs, so existing objects apply unchanged; the schemas add descriptions and
//! CEL rules ([`cel`], [`nvidia_driver::cel`]) that reject mistakes at `kubectl apply`. The CRD
//! YAML under `crds/` is generated from these types by `cargo xtask codegen`.

pub mod cel;
mod cluster_policy;
pub mod compute_domain;
pub mod conditions;
pub mod gpu_cluster;
pub mod labels;
pub mod node_validation;
pub mod nvidia_driver;
mod schema;
pub mod spec;
pub mod status;
pub mod validator;
mod yaml;

pub use cluster_policy::{ClusterPolicy, ClusterPolicySpec};
pub use gpu_cluster::{GpuCluster, GpuClusterSpec, GpuClusterStatus};
pub use nvidia_driver::{NvidiaDriver, NvidiaDriverSpec, NvidiaDriverStatus};
pub use status::{ClusterPolicyStatus, State};

/// Name of the ClusterPolicy NVIDIA's Helm chart (and ours) creates.
pub const DEFAULT_NAME: &str = "cluster-policy";
/// API group of ClusterPolicy.
pub const GROUP: &str = "nvidia.com";
/// Name of the ClusterPolicy CRD.
pub const CRD_NAME: &str = "clusterpolicies.nvidia.com";

/// The ClusterPolicy CRD as YAML, as `cargo xtask codegen` writes it and `gpu-operator crds` prints it.
pub fn crd_yaml() -> Result<String, serde_json::Error> {
    use kube::CustomResourceExt as _;
    to_yaml(&ClusterPolicy::crd())
}

/// The NVIDIADriver CRD as YAML, as `cargo xtask codegen` writes it and `gpu-operator crds`
/// prints it.
pub fn nvidia_driver_crd_yaml() -> Result<String, serde_json::Error> {
    use kube::CustomResourceExt as _;
    to_yaml(&NvidiaDriver::crd())
}

/// The GPUCluster CRD as YAML, as `cargo xtask codegen` writes it and `gpu-operator crds` prints
/// it.
pub fn gpu_cluster_crd_yaml() -> Result<String, serde_json::Error> {
    use kube::CustomResourceExt as _;
    to_yaml(&GpuCluster::crd())
}

/// The DRA driver's CRDs (ComputeDomain, ComputeDomainClique) as YAML, as `cargo xtask codegen`
/// writes them and `gpu-operator crds` prints them.
pub fn compute_domain_crds_yaml() -> Result<String, serde_json::Error> {
    Ok(format!(
        "{}---\n{}",
        to_yaml(&compute_domain::compute_domain_crd()?)?,
        to_yaml(&compute_domain::compute_domain_clique_crd()?)?
    ))
}

fn to_yaml(crd: &impl serde::Serialize) -> Result<String, serde_json::Error> {
    let value = serde_json::to_value(crd)?;
    let mut out = String::new();
    yaml::write(&value, &mut out);
    Ok(out)
}
