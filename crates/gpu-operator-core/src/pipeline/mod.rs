//! The reconcile pipeline every operand runs, written once and generic over the custom resource
//! that owns the operand ([`crate::contract::Owner`]; ClusterPolicy in [`cluster_policy`],
//! NVIDIADriver in [`nvidia_driver`], GPUCluster in [`gpu_cluster`]): the validate → render → apply → status steps of
//! [`operand`] (over the [`crate::contract::Operand`] an operand crate supplies), the Controllers
//! that wake it ([`controller`], [`coalesce`]), which owners are [`active`], how children are
//! written ([`children`], [`apply`], with [`adopt`] and [`takeover`] for what another operator
//! left, and [`leftovers`] for what it left that we do not render), and how conditions reach the
//! owner's status ([`status_write`], [`write_gate`], [`status_batch`], with an operand's
//! [`warning`]s), and the [`events`] about it.

pub mod active;
pub mod adopt;
pub mod apply;
pub mod children;
pub mod cluster_policy;
pub mod coalesce;
pub mod controller;
pub mod events;
pub mod gpu_cluster;
pub mod leftovers;
pub mod nvidia_driver;
pub mod operand;
pub mod status_batch;
pub mod status_write;
pub mod takeover;
#[cfg(test)]
mod test_pool;
pub mod warning;
pub mod write_gate;
