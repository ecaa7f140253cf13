//! Shared pieces of the end-to-end tests: how to reach the local cluster, and the simulated GPU fleet;
//! with the `e2e` feature also the support the scenarios share (`scenario`: the operator's
//! environment and waits; `quiet`: quiet windows and their positive control; `real_node_pods`;
//! `validator_host`: the validator run as a host process).
//!
//! The tests under `tests/` only compile with the `e2e` feature and expect a cluster started by
//! `cargo xtask cluster up` (or `cargo xtask e2e`, which starts one when none is up).

pub mod chart;
pub mod crd;
pub mod fleet;
pub mod harness;
pub mod mutate;
pub mod node_marks;
pub mod operator;
#[cfg(feature = "e2e")]
pub mod quiet;
pub mod real_node;
#[cfg(feature = "e2e")]
pub mod real_node_pods;
#[cfg(feature = "e2e")]
pub mod scenario;
#[cfg(feature = "e2e")]
pub mod validator_host;

pub use harness::{client, kubectl, unique_name, wait_until};
