//! The node-side validator (`gpu-operator-validator`): checks one component of a node's GPU stack,
//! writes NVIDIA's status files under `/run/nvidia/validations`, and reports Node conditions.
//!
//! It is the command of the `nvidia-operator-validator` DaemonSet's containers (and of the
//! `driver-validation` init containers of other operands), a drop-in for NVIDIA's
//! `nvidia-validator`: same components, environment variables, status files and exit semantics.
//!
//! # Components
//!
//! | component | passes when | status file | Node condition |
//! |---|---|---|---|
//! | `driver` | `nvidia-smi` is found under the host root (`HOST_ROOT_CTR_PATH`, host driver first) or the driver install dir; the kernel module is loaded (`/proc/driver/nvidia/version`); NVML (dlopened at run time, `nvml-wrapper`) or, as fallback, `nvidia-smi -q` reports the driver version, CUDA version and at least one GPU; module and library versions agree | `driver-ready` (`KEY=VALUE`: `IS_HOST_DRIVER`, `NVIDIA_DRIVER_ROOT`, `DRIVER_ROOT_CTR_PATH`, `NVIDIA_DEV_ROOT`, `DEV_ROOT_CTR_PATH`) | `GPUDriverReady` |
//! | `toolkit` | the `nvidia-smi` the runtime injected into this container (nvidia runtime class or CDI) is on `PATH`, works and sees GPUs | `toolkit-ready` | `GPUToolkitReady` |
//! | `cuda` | a pod pinned to the node (`nodeName`) running `vectorAdd` from the CUDA check image (`CUDA_VALIDATOR_IMAGE`, else `VALIDATOR_IMAGE`; ours is the `gpu-operator-cuda-workload` crate) succeeds; no image configured fails with `CUDAImageNotConfigured` | `cuda-ready` | `GPUCudaReady` |
//! | `plugin` | the node's capacity has `nvidia.com/gpu*` (MIG strategy none/single) or `nvidia.com/mig-*` (mixed) and GFD's `nvidia.com/mig.strategy` agrees; with `WITH_WORKLOAD` a pod requesting one runs | `plugin-ready` | `GPUDevicePluginReady` |
//!
//! | `metrics` | not a check: NVIDIA's node status exporter, serving the node's `gpu_operator_node_*` gauges on `:METRICS_PORT` (see [`metrics`]) | – | – |
//! | `discover` | not a check: GPU node discovery without NFD, writing the NFD labels the operator reads on its own node (see [`discovery`]) | – | – |
//!
//! Every run also derives `GPUStackReady`: True when the driver, toolkit, CUDA and device plugin
//! conditions are True (on a node without `GPUCudaReady`, written by an earlier release, an
//! existing `cuda-ready` stands for it); otherwise False with the first failing
//! component (`DriverNotReady`, `ToolkitNotReady`, `CUDANotReady`, `DevicePluginNotReady`) or
//! `ValidationPending`. Reasons are the constants of [`gpu_operator_api::validator::reason`].
//! Conditions are written with a strategic merge patch of `nodes/status` keyed by `type`, guarded
//! by the node's resourceVersion; kubelet's conditions are never touched, `lastTransitionTime`
//! moves only when the status flips, and no request is made when nothing changed.
//!
//! # Exit codes
//!
//! `0` validated (and reported); `1` the check failed (the status file is absent; with
//! `WITH_WAIT=true` the validator instead retries every `SLEEP_INTERVAL_SECONDS` until it passes,
//! except for configuration failures such as a missing CUDA image); `2` invalid configuration;
//! `3` the check passed but the Node conditions could not be written (retried with `WITH_WAIT`).
//!
//! # Environment
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `COMPONENT` (or the first argument) | – | `driver`, `toolkit`, `cuda`, `plugin` or `metrics` |
//! | `WITH_WAIT` | `false` | retry until the check passes |
//! | `WITH_WORKLOAD` | `true` | run the workload pod of `cuda` / `plugin` |
//! | `NODE_NAME` | – | this node; required by `plugin` and `cuda` with workload; enables reporting |
//! | `OPERATOR_NAMESPACE` | – | namespace of the workload pods; required with a workload |
//! | `POD_NAME` | – | the validator's pod, made owner of the workload pods |
//! | `OUTPUT_DIR` | `/run/nvidia/validations` | status files |
//! | `CLEANUP_ALL` | `false` | delete all status files first |
//! | `SLEEP_INTERVAL_SECONDS` | `5` | pause between retries and pod polls |
//! | `MIG_STRATEGY` | `single` | `none`, `single` or `mixed` |
//! | `HOST_ROOT` | `/` | the host's root as a host path (written to `driver-ready`) |
//! | `HOST_ROOT_CTR_PATH` | `/host` | where the host's root is mounted in this container |
//! | `DRIVER_INSTALL_DIR` | `/run/nvidia/driver` | host path of a containerized driver |
//! | `DRIVER_INSTALL_DIR_CTR_PATH` | `/run/nvidia/driver` | where it is mounted here |
//! | `DRIVER_VALIDATION_SKIP_GPU_INIT` | `false` | check with `nvidia-smi --version` only |
//! | `NVIDIA_SMI_TIMEOUT_SECONDS` | `60` | kill a hanging `nvidia-smi` (`NvidiaSmiTimeout`) |
//! | `GPU_RESOURCE_WAIT_SECONDS` | `150` | how long `plugin` waits for GPU capacity |
//! | `VALIDATOR_IMAGE`, `CUDA_VALIDATOR_IMAGE` | – | workload pod images |
//! | `VALIDATOR_IMAGE_PULL_POLICY`, `VALIDATOR_IMAGE_PULL_SECRETS`, `VALIDATOR_RUNTIME_CLASS` | – | workload pod settings |
//! | `WORKLOAD_COMMAND` | `vectorAdd` | command of the workload pods |
//! | `WORKLOAD_TIMEOUT_SECONDS` | `300` | `WorkloadTimeout` after this long |
//! | `REPORT_NODE_CONDITIONS` | `true` | write Node conditions (needs `NODE_NAME`) |
//! | `LIFT_STARTUP_TAINT` | `false` | remove `nvidia.com/gpu.not-ready:NoSchedule` once `GPUStackReady` is True |
//! | `METRICS_PORT` | `8000` | port of the `metrics` component |
//! | `DEVICE_PLUGIN_ENABLED` | `true` | `false`: `metrics` reports the device count as -1 |
//! | `DISCOVERY_INTERVAL_SECONDS` | `600` | seconds between passes of `discover` |
//! | `KUBECONFIG` | – | used when not in a cluster (`kube::Client::try_default`) |
//!
//! # RBAC
//!
//! The validator's ServiceAccount needs exactly:
//!
//! ```yaml
//! # ClusterRole (nodes are cluster-scoped)
//! - apiGroups: [""]
//!   resources: ["nodes"]
//!   verbs: ["get", "patch"]        # read capacity/conditions; patch: lift the startup taint
//! - apiGroups: [""]
//!   resources: ["nodes/status"]
//!   verbs: ["patch"]               # write the GPU* Node conditions
//! # Role in the operator's namespace
//! - apiGroups: [""]
//!   resources: ["pods"]
//!   verbs: ["create", "get", "list", "delete"]   # workload pods; get: its own pod (owner)
//! ```
//!
//! The `metrics` component needs only `nodes` `get` (its own Node's GPU capacity).
//! `nodes` `patch` is only used with `LIFT_STARTUP_TAINT=true`; the `pods` rules only by the
//! `cuda` and `plugin` components. Operands that reuse the validator only as a gate (the
//! `driver-validation` init containers of the toolkit, device plugin, …) should set
//! `REPORT_NODE_CONDITIONS=false` unless their ServiceAccount has the node rules: with reporting
//! on and no permission, the run exits 3 (and `WITH_WAIT` keeps retrying).

pub mod components;
pub mod config;
pub mod discovery;
pub mod health;
pub mod host;
pub mod lifecycle;
pub mod metrics;
pub mod node_conditions;
pub mod nvml;
pub mod run;
pub mod smi;
pub mod smi_xml;
pub mod status_files;
pub mod summary;
pub mod taint;
#[cfg(test)]
mod testing;
#[cfg(test)]
mod tests;
pub mod workload_pod;

pub use run::{EXIT_FAILED, EXIT_NOT_REPORTED, EXIT_USAGE, EXIT_VALIDATED, run};
