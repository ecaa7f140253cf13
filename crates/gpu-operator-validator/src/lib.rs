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
//! | `vfio-pci` | on `vm-passthrough` nodes: every NVIDIA GPU (sysfs `bus/pci/devices`, vendor `0x10de`, class `0x0300xx`/`0x0302xx`, not a virtual function) is bound to `vfio-pci` (or `nvgrace_gpu_vfio_pci`), and there is one | `vfio-pci-ready` | `GPUVfioPciReady` |
//! | `vgpu-manager` | on `vm-vgpu` nodes: the vGPU host driver's `nvidia-smi -q` answers (the host's first, else the driver install dir's) and its parent devices are there (every SR-IOV virtual function enabled when a GPU has some, else an NVIDIA GPU under `class/mdev_bus`) | `host-vgpu-manager-ready` (host driver) or `vgpu-manager-ready` | `GPUVgpuManagerReady` |
//! | `vgpu-devices` | on `vm-vgpu` nodes: a vGPU exists (an NVIDIA mediated device under `bus/mdev/devices`, or a virtual function whose `nvidia/current_vgpu_type` is not 0) | `vgpu-devices-ready` | `GPUVgpuDevicesReady` |
//! | `cc-manager` | on nodes labelled `nvidia.com/cc.capable=true`: NVIDIA's CC manager wrote `.cc-manager-ctr-ready` and its `nvidia.com/cc.mode.state` is the `nvidia.com/cc.mode` asked for (not `failed`); other nodes pass | `cc-manager-ready` | `GPUCcManagerReady` |
//!
//! The sandbox components (the last four, see [`components::sandbox`]) read the node's labels.
//! `vfio-pci`, `vgpu-manager` and `vgpu-devices` first write the node's workload config to
//! `workload-type` (its `nvidia.com/gpu.workload.config` label, else `DEFAULT_GPU_WORKLOAD_CONFIG`,
//! else `vm-passthrough`); on a node of another workload config they pass with reason
//! `NotRequired` and leave no status file, as NVIDIA's do. They read the host's sysfs at
//! `SYSFS_ROOT` (default `HOST_ROOT_CTR_PATH/sys`, else `/sys`) and write only their own
//! condition: they take no part in `GPUStackReady` nor in lifting the startup taint.
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
//! | `COMPONENT` (or the first argument) | – | `driver`, `toolkit`, `cuda`, `plugin`, `vfio-pci`, `vgpu-manager`, `vgpu-devices`, `cc-manager` or `metrics` |
//! | `WITH_WAIT` | `false` | retry until the check passes |
//! | `WITH_WORKLOAD` | `true` | run the workload pod of `cuda` / `plugin` |
//! | `NODE_NAME` | – | this node; required by `plugin`, `cuda` with workload and the sandbox components; enables reporting |
//! | `OPERATOR_NAMESPACE` | – | namespace of the workload pods; required with a workload |
//! | `POD_NAME` | – | the validator's pod, made owner of the workload pods |
//! | `OUTPUT_DIR` | `/run/nvidia/validations` | status files |
//! | `CLEANUP_ALL` | `false` | delete all status files first |
//! | `SLEEP_INTERVAL_SECONDS` | `5` | pause between retries and pod polls |
//! | `MIG_STRATEGY` | `single` | `none`, `single` or `mixed` |
//! | `HOST_ROOT` | `/` | the host's root as a host path (written to `driver-ready`) |
//! | `HOST_ROOT_CTR_PATH` | `/host` | where the host's root is mounted in this container |
//! | `SYSFS_ROOT` | `HOST_ROOT_CTR_PATH/sys`, else `/sys` | the host's sysfs, for the sandbox components |
//! | `DEFAULT_GPU_WORKLOAD_CONFIG` | `vm-passthrough` | workload config of a node without a valid `nvidia.com/gpu.workload.config` label |
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
//! The `metrics` component needs only `nodes` `get` (its own Node's GPU capacity); the sandbox
//! components `nodes` `get` (the node's labels) and, to report, `nodes/status` `patch`.
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
