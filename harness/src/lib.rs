//! The test harness the e2e tests (`e2e/`) and the automation (`xtask/`) share, so neither
//! depends on the other: how to reach the local cluster ([`access`]), the simulated GPU
//! [`fleet`], the operator run as a host process and its audit log ([`operator`]), the Helm
//! [`chart`] and the operator's identity taken from it, the CRDs ([`crd`]), the DRA kubelet plugin's ResourceSlices ([`dra`]), the real node's names
//! ([`real_node`]), marks scenarios put on nodes ([`node_marks`]) and random edits of JSON
//! documents for fuzzing ([`mutate`]).
//!
//! Nothing here needs a running cluster to compile; what reaches one expects a cluster started by
//! `cargo xtask cluster up`.

pub mod access;
pub mod chart;
pub mod crd;
pub mod dra;
pub mod fleet;
pub mod mutate;
pub mod node_marks;
pub mod operator;
pub mod real_node;

pub use access::{client, kubectl, unique_name, wait_until};
