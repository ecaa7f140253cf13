//! The support the end-to-end scenarios share, compiled only with the `e2e` feature
//! (`scenario`: the operator's environment and waits; `dra_scenario`: the GPUCluster, its pools and claims; `quiet`: quiet windows and their positive
//! control; `fake_nvml`: the fake NVML library and the health agent run on it; `nvidia_fixture`: the state NVIDIA's operator left, to migrate from; `real_node_pods`; `validator_host`: the validator run as a host process). The harness
//! they run on (reaching the cluster, the simulated fleet, the operator as a host process, the
//! chart) is the `gpu-operator-harness` crate, which `xtask` uses too.
//!
//! The tests under `tests/` only compile with the `e2e` feature and expect a cluster started by
//! `cargo xtask cluster up` (or `cargo xtask e2e`, which starts one when none is up).

#[cfg(feature = "e2e")]
pub mod dra_scenario;
#[cfg(feature = "e2e")]
pub mod fake_nvml;
#[cfg(feature = "e2e")]
pub mod nvidia_fixture;
#[cfg(feature = "e2e")]
pub mod quiet;
#[cfg(feature = "e2e")]
pub mod real_node_pods;
#[cfg(feature = "e2e")]
pub mod scenario;
#[cfg(feature = "e2e")]
pub mod validator_host;
