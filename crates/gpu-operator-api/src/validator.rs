//! Names shared between the node-side validator (`gpu-operator-validator`) and the operator that
//! deploys it: environment variables, status files, the startup taint and the reasons of the Node
//! conditions listed in [`crate::conditions::node`].

/// Taint key that keeps ordinary workloads off a GPU node until its stack is validated. Nodes
/// register with it (kubelet `--register-with-taints`); the validator removes it when asked.
pub const STARTUP_TAINT_KEY: &str = "nvidia.com/gpu.not-ready";
/// Effect of the startup taint.
pub const STARTUP_TAINT_EFFECT: &str = "NoSchedule";

/// `app` label of the CUDA workload pods, as NVIDIA names them.
pub const CUDA_WORKLOAD_APP: &str = "nvidia-cuda-validator";
/// `app` label of the device plugin workload pods, as NVIDIA names them.
pub const PLUGIN_WORKLOAD_APP: &str = "nvidia-device-plugin-validator";

/// The components the validator checks (`COMPONENT`).
pub mod component {
    /// The driver: loaded, and NVML or `nvidia-smi` see the GPUs.
    pub const DRIVER: &str = "driver";
    /// The container toolkit: a container of the nvidia runtime class gets a working `nvidia-smi`.
    pub const TOOLKIT: &str = "toolkit";
    /// A CUDA workload pod runs on the node.
    pub const CUDA: &str = "cuda";
    /// The device plugin advertises the node's GPUs.
    pub const PLUGIN: &str = "plugin";
    /// Sandbox (`vm-passthrough`): every NVIDIA GPU is bound to `vfio-pci`.
    pub const VFIO_PCI: &str = "vfio-pci";
    /// Sandbox (`vm-vgpu`): the vGPU host driver (vGPU manager) works.
    pub const VGPU_MANAGER: &str = "vgpu-manager";
    /// Sandbox (`vm-vgpu`): vGPU devices exist.
    pub const VGPU_DEVICES: &str = "vgpu-devices";
    /// Sandbox: the confidential-computing manager has set the node's CC mode.
    pub const CC_MANAGER: &str = "cc-manager";
    /// Not a check: the node status exporter's Prometheus endpoint (`nvidia-node-status-exporter`).
    pub const METRICS: &str = "metrics";
}

/// Environment variables the validator reads. The first group is NVIDIA's, with NVIDIA's
/// meaning; the second is ours.
pub mod env {
    /// Which component to check (`driver`, `toolkit`, `cuda`, `plugin`, or a sandbox one:
    /// `vfio-pci`, `vgpu-manager`, `vgpu-devices`, `cc-manager`).
    pub const COMPONENT: &str = "COMPONENT";
    /// `true`: retry every `SLEEP_INTERVAL_SECONDS` until the check passes.
    pub const WITH_WAIT: &str = "WITH_WAIT";
    /// `false`: skip the workload pod of the `cuda` and `plugin` checks (default `true`).
    pub const WITH_WORKLOAD: &str = "WITH_WORKLOAD";
    /// The node the validator runs on (downward API `spec.nodeName`).
    pub const NODE_NAME: &str = "NODE_NAME";
    /// Namespace of the operator, where workload pods are created.
    pub const OPERATOR_NAMESPACE: &str = "OPERATOR_NAMESPACE";
    /// Directory of the status files (default `/run/nvidia/validations`).
    pub const OUTPUT_DIR: &str = "OUTPUT_DIR";
    /// Seconds between retries with `WITH_WAIT` (default 5).
    pub const SLEEP_INTERVAL_SECONDS: &str = "SLEEP_INTERVAL_SECONDS";
    /// MIG strategy of the device plugin: `none`, `single` (default) or `mixed`.
    pub const MIG_STRATEGY: &str = "MIG_STRATEGY";
    /// Path of the host's root filesystem on the host (default `/`), written to `driver-ready`.
    pub const HOST_ROOT: &str = "HOST_ROOT";
    /// Host path of a containerized driver installation (default `/run/nvidia/driver`).
    pub const DRIVER_INSTALL_DIR: &str = "DRIVER_INSTALL_DIR";
    /// Where `DRIVER_INSTALL_DIR` is mounted in the validator container (default `/run/nvidia/driver`).
    pub const DRIVER_INSTALL_DIR_CTR_PATH: &str = "DRIVER_INSTALL_DIR_CTR_PATH";
    /// `true`: check the driver with `nvidia-smi --version`, without initializing the GPUs.
    pub const DRIVER_VALIDATION_SKIP_GPU_INIT: &str = "DRIVER_VALIDATION_SKIP_GPU_INIT";
    /// Workload config of nodes without a valid `nvidia.com/gpu.workload.config` label, for the
    /// sandbox components: `container`, `vm-passthrough` (the default) or `vm-vgpu`.
    pub const DEFAULT_GPU_WORKLOAD_CONFIG: &str = "DEFAULT_GPU_WORKLOAD_CONFIG";
    /// `true`: delete every status file in `OUTPUT_DIR` before checking.
    pub const CLEANUP_ALL: &str = "CLEANUP_ALL";
    /// Image of the workload pods (NVIDIA's name).
    pub const VALIDATOR_IMAGE: &str = "VALIDATOR_IMAGE";
    /// Pull policy of the workload pods.
    pub const VALIDATOR_IMAGE_PULL_POLICY: &str = "VALIDATOR_IMAGE_PULL_POLICY";
    /// Comma-separated pull secrets of the workload pods.
    pub const VALIDATOR_IMAGE_PULL_SECRETS: &str = "VALIDATOR_IMAGE_PULL_SECRETS";
    /// Runtime class of the workload pods (usually `nvidia`).
    pub const VALIDATOR_RUNTIME_CLASS: &str = "VALIDATOR_RUNTIME_CLASS";

    /// Where the host's root filesystem is mounted in the validator container (default `/host`).
    pub const HOST_ROOT_CTR_PATH: &str = "HOST_ROOT_CTR_PATH";
    /// The host's sysfs as seen by the sandbox components (default `HOST_ROOT_CTR_PATH/sys`
    /// when that is a directory, else `/sys`, which a privileged container shares with the host).
    pub const SYSFS_ROOT: &str = "SYSFS_ROOT";
    /// Image of the CUDA check pod; takes precedence over `VALIDATOR_IMAGE`.
    pub const CUDA_VALIDATOR_IMAGE: &str = "CUDA_VALIDATOR_IMAGE";
    /// Command of the workload pods, split on whitespace (default `vectorAdd`).
    pub const WORKLOAD_COMMAND: &str = "WORKLOAD_COMMAND";
    /// Seconds to wait for a workload pod to succeed (default 300).
    pub const WORKLOAD_TIMEOUT_SECONDS: &str = "WORKLOAD_TIMEOUT_SECONDS";
    /// Seconds the `plugin` check waits for GPU capacity to appear on the node (default 150).
    pub const GPU_RESOURCE_WAIT_SECONDS: &str = "GPU_RESOURCE_WAIT_SECONDS";
    /// Seconds before a hanging `nvidia-smi` is killed (default 60).
    pub const NVIDIA_SMI_TIMEOUT_SECONDS: &str = "NVIDIA_SMI_TIMEOUT_SECONDS";
    /// Name of the validator's own pod (downward API), owner of the workload pods.
    pub const POD_NAME: &str = "POD_NAME";
    /// `true`: remove the startup taint from the node once `GPUStackReady` is True.
    pub const LIFT_STARTUP_TAINT: &str = "LIFT_STARTUP_TAINT";
    /// `false`: do not write Node conditions (default `true` when `NODE_NAME` is set).
    pub const REPORT_NODE_CONDITIONS: &str = "REPORT_NODE_CONDITIONS";
    /// `true` when the operator deploys the driver container (`driver.enabled`): without a host
    /// driver, the driver check waits for the container's `.driver-ctr-ready` before it looks.
    pub const DRIVER_MANAGED_BY_OPERATOR: &str = "DRIVER_MANAGED_BY_OPERATOR";
    /// Port of the `metrics` component's HTTP server (default 8000).
    pub const METRICS_PORT: &str = "METRICS_PORT";
    /// `false` when `devicePlugin.enabled` is false: the `metrics` component then reports
    /// `gpu_operator_node_device_plugin_devices_total` as -1 instead of 0 (default `true`).
    pub const DEVICE_PLUGIN_ENABLED: &str = "DEVICE_PLUGIN_ENABLED";
}

/// Status files in the output directory, NVIDIA's names: present while a component is validated.
pub mod status_file {
    /// Written by the driver check: `KEY=VALUE` lines sourced by other operands.
    pub const DRIVER: &str = "driver-ready";
    /// Written by the toolkit check (empty).
    pub const TOOLKIT: &str = "toolkit-ready";
    /// Written by the CUDA check (empty).
    pub const CUDA: &str = "cuda-ready";
    /// Written by the device plugin check (empty).
    pub const PLUGIN: &str = "plugin-ready";
    /// Written by the driver container's startup probe when its install finished.
    pub const DRIVER_CONTAINER_READY: &str = ".driver-ctr-ready";
    /// Written by the `vfio-pci` check (empty).
    pub const VFIO_PCI: &str = "vfio-pci-ready";
    /// Written by the `vgpu-manager` check when the vGPU host driver is a container's (empty).
    pub const VGPU_MANAGER: &str = "vgpu-manager-ready";
    /// Written by the `vgpu-manager` check when the vGPU host driver is installed on the host.
    pub const HOST_VGPU_MANAGER: &str = "host-vgpu-manager-ready";
    /// Written by the `vgpu-devices` check (empty).
    pub const VGPU_DEVICES: &str = "vgpu-devices-ready";
    /// Written by the `cc-manager` check (empty).
    pub const CC_MANAGER: &str = "cc-manager-ready";
    /// The node's workload config (`container`, `vm-passthrough`, `vm-vgpu` and a newline),
    /// written by the `vfio-pci`, `vgpu-manager` and `vgpu-devices` checks; the sandbox device
    /// plugin reads it to know which of their files to wait for.
    pub const WORKLOAD_TYPE: &str = "workload-type";
    /// Written by NVIDIA's CC manager once it has applied the node's CC mode.
    pub const CC_MANAGER_CONTAINER_READY: &str = ".cc-manager-ctr-ready";

    /// Keys of the `driver-ready` file.
    pub mod driver_key {
        /// `true` when the driver is installed on the host, `false` for a driver container.
        pub const IS_HOST_DRIVER: &str = "IS_HOST_DRIVER";
        /// Host path of the driver's root filesystem.
        pub const NVIDIA_DRIVER_ROOT: &str = "NVIDIA_DRIVER_ROOT";
        /// Where operand containers mount the driver root (`/host` or `/driver-root`).
        pub const DRIVER_ROOT_CTR_PATH: &str = "DRIVER_ROOT_CTR_PATH";
        /// Host path under which `/dev/nvidia*` live.
        pub const NVIDIA_DEV_ROOT: &str = "NVIDIA_DEV_ROOT";
        /// Where operand containers mount the device root.
        pub const DEV_ROOT_CTR_PATH: &str = "DEV_ROOT_CTR_PATH";
    }
}

/// Reasons of the Node conditions the validator writes (PascalCase, stable: alerts match them).
pub mod reason {
    /// `GPUDriverReady=True`.
    pub const DRIVER_VALIDATED: &str = "DriverValidated";
    /// No `nvidia-smi` on the host nor in the driver install directory.
    pub const DRIVER_NOT_FOUND: &str = "DriverNotFound";
    /// The NVIDIA kernel module is not loaded (`/proc/driver/nvidia/version` is missing).
    pub const DRIVER_NOT_LOADED: &str = "DriverNotLoaded";
    /// The loaded kernel module and the user-space driver have different versions.
    pub const DRIVER_VERSION_MISMATCH: &str = "DriverVersionMismatch";
    /// Neither NVML nor `nvidia-smi` could query the driver.
    pub const DRIVER_QUERY_FAILED: &str = "DriverQueryFailed";
    /// The driver works but sees no GPU.
    pub const NO_GPU: &str = "NoGPU";
    /// `nvidia-smi` did not answer in time.
    pub const NVIDIA_SMI_TIMEOUT: &str = "NvidiaSmiTimeout";
    /// `GPUToolkitReady=True`.
    pub const TOOLKIT_VALIDATED: &str = "ToolkitValidated";
    /// The container runtime did not inject `nvidia-smi` into the validator container.
    pub const NVIDIA_SMI_NOT_INJECTED: &str = "NvidiaSmiNotInjected";
    /// The injected `nvidia-smi` failed.
    pub const NVIDIA_SMI_FAILED: &str = "NvidiaSmiFailed";
    /// `GPUDevicePluginReady=True`.
    pub const DEVICE_PLUGIN_VALIDATED: &str = "DevicePluginValidated";
    /// The node advertises no `nvidia.com/gpu*` or `nvidia.com/mig-*` capacity.
    pub const NO_GPU_RESOURCES: &str = "NoGPUResources";
    /// The advertised resources (or GFD's `nvidia.com/mig.strategy`) contradict `MIG_STRATEGY`.
    pub const MIG_STRATEGY_MISMATCH: &str = "MIGStrategyMismatch";
    /// `GPUCudaReady=True`: the CUDA workload computed the right result on the node's GPUs.
    pub const CUDA_VALIDATED: &str = "CUDAValidated";
    /// No image is configured for the CUDA check pod.
    pub const CUDA_IMAGE_NOT_CONFIGURED: &str = "CUDAImageNotConfigured";
    /// `WITH_WORKLOAD` is on but no image is configured for the device plugin workload pod.
    pub const WORKLOAD_IMAGE_NOT_CONFIGURED: &str = "WorkloadImageNotConfigured";
    /// A workload pod failed.
    pub const WORKLOAD_FAILED: &str = "WorkloadFailed";
    /// A workload pod did not succeed in time.
    pub const WORKLOAD_TIMEOUT: &str = "WorkloadTimeout";
    /// The Kubernetes API failed during a check.
    pub const API_ERROR: &str = "APIError";
    /// The status file could not be written.
    pub const STATUS_FILE_ERROR: &str = "StatusFileError";
    /// `GPUDriverReady=False`: the operator's driver container has not finished on the node.
    pub const DRIVER_CONTAINER_NOT_READY: &str = "DriverContainerNotReady";
    /// A sandbox component's condition is True without a check: the node's workload config
    /// (or, for `cc-manager`, its lack of CC capability) does not need it; so is the device
    /// plugin's on a node whose GPUs the DRA driver offers.
    pub const NOT_REQUIRED: &str = "NotRequired";
    /// A container-stack component was handed to the sandbox checks (a bug, never retried).
    pub const NOT_A_SANDBOX_COMPONENT: &str = "NotASandboxComponent";
    /// `GPUVfioPciReady=True`: every NVIDIA GPU is bound to `vfio-pci`.
    pub const VFIO_PCI_VALIDATED: &str = "VfioPciValidated";
    /// No NVIDIA GPU (PCI vendor `0x10de`, class `0x0300xx`/`0x0302xx`) under the sysfs root.
    pub const NO_GPU_DEVICE: &str = "NoGPUDevice";
    /// An NVIDIA GPU is bound to another driver than `vfio-pci`, or to none.
    pub const GPU_NOT_BOUND_TO_VFIO: &str = "GPUNotBoundToVfio";
    /// The sysfs tree could not be read.
    pub const SYSFS_UNREADABLE: &str = "SysfsUnreadable";
    /// `GPUVgpuManagerReady=True`.
    pub const VGPU_MANAGER_VALIDATED: &str = "VgpuManagerValidated";
    /// No `nvidia-smi` of a vGPU host driver on the host nor in the driver install dir.
    pub const VGPU_MANAGER_NOT_FOUND: &str = "VgpuManagerNotFound";
    /// The vGPU host driver's `nvidia-smi` failed.
    pub const VGPU_MANAGER_FAILED: &str = "VgpuManagerFailed";
    /// The vGPU host driver works but has not registered its parent devices (mdev parents, or
    /// every SR-IOV virtual function) yet.
    pub const VGPU_PARENT_DEVICES_NOT_READY: &str = "VgpuParentDevicesNotReady";
    /// `GPUVgpuDevicesReady=True`.
    pub const VGPU_DEVICES_VALIDATED: &str = "VgpuDevicesValidated";
    /// No vGPU device: no NVIDIA mdev device and no virtual function with a vGPU type.
    pub const NO_VGPU_DEVICES: &str = "NoVgpuDevices";
    /// `GPUCcManagerReady=True`.
    pub const CC_MANAGER_VALIDATED: &str = "CCManagerValidated";
    /// NVIDIA's CC manager has not written `.cc-manager-ctr-ready` yet.
    pub const CC_MANAGER_NOT_READY: &str = "CCManagerNotReady";
    /// `nvidia.com/cc.mode` is not a CC mode.
    pub const INVALID_CC_MODE: &str = "InvalidCCMode";
    /// The CC manager reports `nvidia.com/cc.mode.state=failed`.
    pub const CC_MODE_FAILED: &str = "CCModeFailed";
    /// The CC mode reached differs from the one asked for.
    pub const CC_MODE_MISMATCH: &str = "CCModeMismatch";
    /// `GPUStackReady=True`: driver, toolkit, CUDA and device plugin are validated.
    pub const STACK_READY: &str = "StackReady";
    /// `GPUStackReady=False`: a component has not been checked yet.
    pub const VALIDATION_PENDING: &str = "ValidationPending";
    /// `GPUStackReady=False`: `GPUDriverReady` is False.
    pub const DRIVER_NOT_READY: &str = "DriverNotReady";
    /// `GPUStackReady=False`: `GPUToolkitReady` is False.
    pub const TOOLKIT_NOT_READY: &str = "ToolkitNotReady";
    /// `GPUStackReady=False`: `GPUCudaReady` is False.
    pub const CUDA_NOT_READY: &str = "CUDANotReady";
    /// `GPUStackReady=False`: `GPUDevicePluginReady` is False.
    pub const DEVICE_PLUGIN_NOT_READY: &str = "DevicePluginNotReady";
}
