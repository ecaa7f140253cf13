//! The node-labelling reconciler: keeps `nvidia.com/gpu.present`, the
//! `nvidia.com/gpu.deploy.<operand>` scheduling gates and the `nvidia.com/mig.config` seed on
//! every node exactly as NVIDIA's operator does (reference §1.5), and NVIDIA's
//! `nvidia.com/gpu-operator.driver.owner` while NVIDIADrivers deploy the drivers
//! ([`driver_owner`]).
//!
//! [`desired`] is the contract as a pure function; [`reconcile`] runs it per node on the shared
//! metadata-only Node cache and writes one JSON merge patch per node when something changes.
//! [`mig_layout`] holds the GPU clients' deploy labels back on a node that waits for its MIG
//! layout, and the reconciler says so in an Event on the node. [`mig_watchdog`] marks a node whose
//! MIG reconfiguration is stuck and recovers failed or stuck ones as the policy says
//! ([`mig_recovery`]). A workload config label of an unknown value is said once in an Event on
//! the node (`InvalidWorkloadConfig`). With a GPUCluster, [`resource_api`] decides per GPU node
//! between the device plugin's gates and the DRA gates (`InvalidResourceAPI` for a label value
//! it does not know); a node whose label asks for the other API switches only once no workload
//! there holds a GPU through the current one ([`api_switch`], `ResourceAPISwitchWaiting`). The binary calls [`controller`].

pub mod api_switch;
mod api_switch_reads;
pub mod desired;
pub mod driver_owner;
mod layout_events;
pub mod mig_layout;
pub mod mig_recovery;
pub mod mig_watchdog;
mod own_writes;
pub mod reconcile;
pub mod resource_api;
pub mod triggers;
pub mod workload;
mod workload_events;

pub use desired::{Decision, LabelChanges, decide, decide_as, decide_served, label_changes};
pub use reconcile::{NAME, NodeLabeler, controller};
