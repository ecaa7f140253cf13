//! Shared pieces of the end-to-end tests: how to reach the local cluster, and the simulated GPU fleet.
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
pub mod real_node;

pub use harness::{client, kubectl, unique_name, wait_until};
