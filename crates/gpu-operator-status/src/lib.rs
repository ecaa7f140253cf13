//! The reconcilers of the ClusterPolicy's status that belong to no operand: [`policy_status`]
//! sums the operands' conditions up into NVIDIA's `state` and `Ready`/`Error` (and applies the
//! singleton rule, labels the namespace for `psa.enabled` with [`pod_security`], sweeps NVIDIA's
//! leftovers); [`node_validation`] sums the validators' node reports up into `NodesValidated`.
//! [`nvidia_driver_status`] does for each NVIDIADriver what [`policy_status`] does for the
//! ClusterPolicy, both writing through [`overall`]; [`gpu_cluster_status`] does it for the
//! GPUCluster, and keeps its finalizer (the ordered teardown, [`gpu_cluster_teardown`]) and the
//! namespace's admin-access label ([`admin_access`]). [`dra_resources`] sums the DRA driver's
//! ResourceSlices up into the GPUCluster's `DRAResourcesPublished`. The binary calls
//! [`run_policy_status`], [`run_nvidia_driver_status`], [`run_gpu_cluster_status`],
//! [`run_node_validation`] and [`run_dra_resources`].

pub mod admin_access;
mod controllers;
pub mod dra_resources;
pub mod gpu_cluster_status;
pub mod gpu_cluster_teardown;
pub mod node_health;
pub mod node_validation;
pub mod nvidia_driver_status;
pub mod overall;
pub mod pod_security;
pub mod policy_status;

pub use controllers::{
    run_dra_resources, run_gpu_cluster_status, run_node_validation, run_nvidia_driver_status,
    run_policy_status,
};
