//! The GPU health agent: `gpu-operator-validator health [--once]`, the `gpu-health` container of
//! the validator's DaemonSet (our image only; see [`gpu_operator_health`] for what it reads and
//! the conditions it writes).
//!
//! Every `HEALTH_POLL_SECONDS` (default 30) it waits for XID events, reads every GPU through the
//! driver's NVML library (found under `DRIVER_INSTALL_DIR_CTR_PATH`, then `HOST_ROOT_CTR_PATH`,
//! else the loader's search path), reads its own Node (`NODE_NAME`: the conditions and
//! `nvidia.com/gpu.count`) and patches `nodes/status` only when a condition changed: a healthy,
//! converged node costs one GET per poll and no write. It never cordons, evicts, resets or
//! reboots anything; engines such as medik8s Node Health Check act on the conditions.
//!
//! `--once` polls once (without waiting for events), prints every value read, the faults and
//! the conditions, and the poll's duration; with `NODE_NAME` and a cluster it also writes them.

pub mod agent;
pub mod config;
pub mod events;

pub use config::HealthConfig;
