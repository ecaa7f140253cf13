//! The driver upgrade reconciler: moves each GPU node through NVIDIA's upgrade states (label
//! `nvidia.com/gpu-driver-upgrade-state`) when its driver pod no longer runs what the driver
//! DaemonSet asks for, as `driver.upgradePolicy` allows — cordon, wait for jobs, evict GPU pods,
//! drain, restart the driver pod, validate, uncordon — and reports the upgrade in the
//! `DriverUpgrade` condition, Events on the nodes and the `gpu_operator_nodes_upgrades_*` metrics.
//!
//! [`plan`] is the state machine as a pure function; [`view`] gathers its facts from the caches
//! (kept compact by `cached`);
//! [`reconcile`] carries its steps out. The binary calls [`controller`].

mod actions;
mod cached;
mod caught_up;
pub mod condition;
mod dra_claims;
pub mod facts;
mod gpu_clients;
mod in_flight;
mod node_step;
pub mod plan;
pub mod policy;
pub mod pools;
pub mod reconcile;
pub mod report;
pub mod selector;
mod selector_check;
pub mod state;
mod transitions;
pub mod triggers;
pub mod view;
mod workload_pod;

pub use actions::FIELD_MANAGER;
pub use reconcile::{NAME, controller};
