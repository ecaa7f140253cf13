//! Condition types and reasons of `ClusterPolicy.status.conditions` and of the Node conditions
//! the validator writes.

/// NVIDIA's condition: the whole stack is ready.
pub const READY: &str = "Ready";
/// NVIDIA's condition: reconciling failed or an operand is not ready (the opposite of `Ready`).
pub const ERROR: &str = "Error";

/// Reasons of the `Ready` and `Error` conditions, as NVIDIA's operator writes them.
pub mod reason {
    /// Every enabled operand is ready.
    pub const RECONCILED: &str = "Reconciled";
    /// Reconciling failed; the message says why.
    pub const RECONCILE_FAILED: &str = "ReconcileFailed";
    /// Some operand is not ready; the message lists them.
    pub const OPERAND_NOT_READY: &str = "OperandNotReady";
    /// No node carries NFD labels: NFD is missing.
    pub const NFD_LABELS_MISSING: &str = "NFDLabelsMissing";
    /// No GPU node in the cluster yet.
    pub const NO_GPU_NODES: &str = "NoGPUNodes";
    /// Reason of `Ready=False` while `Error=True`.
    pub const ERROR: &str = "Error";
    /// Reason of `Error=False` while `Ready=True`.
    pub const READY: &str = "Ready";
    /// An NVIDIADriver's `Error=True`: its driver pods are not ready on every node it serves yet;
    /// the message gives the ready/desired nodes and the first nodes that are not, with why.
    pub const DRIVER_NOT_READY: &str = "DriverNotReady";
    /// An NVIDIADriver's `Error=True`: another NVIDIADriver selects some of its nodes too (or it
    /// is one of several defaults); the message names the nodes and the other NVIDIADrivers.
    pub const CONFLICTING_NODE_SELECTOR: &str = "ConflictingNodeSelector";
}

/// Cuts a condition message or Event note to at most `max` bytes on a character boundary, marking
/// the cut with `...` (the API server refuses longer Event notes; long messages help nobody).
pub fn truncate(message: &str, max: usize) -> String {
    if message.len() <= max {
        return message.to_owned();
    }
    let mut end = max.saturating_sub(3);
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &message[..end])
}

/// Our summary of the validators' Node conditions on the ClusterPolicy: validated/total GPU nodes
/// per component and the first nodes that are not validated.
pub const NODES_VALIDATED: &str = "NodesValidated";

/// Our summary of the GPU health agents' reports on the ClusterPolicy: unhealthy GPU nodes and the
/// first few with their fault class (informational; it does not gate `Ready`).
pub const NODES_HEALTHY: &str = "NodesHealthy";

/// Our summary of the driver upgrade on the ClusterPolicy: nodes on the current driver, nodes per
/// upgrade state, the first stuck or failed nodes with the reason, and how long it has run.
pub const DRIVER_UPGRADE: &str = "DriverUpgrade";

/// Our summary conditions on the GPUCluster.
pub mod gpu_cluster {
    /// Our summary of NVIDIA's DRA driver's ResourceSlices on the GPUCluster: the DRA nodes
    /// (gate `nvidia.com/gpu.deploy.dra-driver=true`) whose ResourceSlices are complete and
    /// publish every GPU of the node, and the first few that do not, with why (informational).
    pub const DRA_RESOURCES_PUBLISHED: &str = "DRAResourcesPublished";
}

/// Our per-operand conditions on the ClusterPolicy, each written by that operand's reconciler.
pub mod operand {
    /// Driver DaemonSet(s).
    pub const DRIVER_READY: &str = "DriverReady";
    /// Container toolkit DaemonSet.
    pub const TOOLKIT_READY: &str = "ToolkitReady";
    /// Device plugin and MPS control daemon DaemonSets.
    pub const DEVICE_PLUGIN_READY: &str = "DevicePluginReady";
    /// GPU Feature Discovery DaemonSet.
    pub const GFD_READY: &str = "GFDReady";
    /// DCGM DaemonSet.
    pub const DCGM_READY: &str = "DCGMReady";
    /// DCGM exporter DaemonSet.
    pub const DCGM_EXPORTER_READY: &str = "DCGMExporterReady";
    /// MIG manager DaemonSet.
    pub const MIG_MANAGER_READY: &str = "MIGManagerReady";
    /// Operator validator DaemonSet.
    pub const VALIDATOR_READY: &str = "ValidatorReady";
    /// Node status exporter DaemonSet.
    pub const NODE_STATUS_EXPORTER_READY: &str = "NodeStatusExporterReady";
    /// VFIO manager DaemonSet (sandbox workloads).
    pub const VFIO_MANAGER_READY: &str = "VfioManagerReady";
    /// KubeVirt GPU device plugin DaemonSet (sandbox workloads, `kubevirt` mode).
    pub const SANDBOX_DEVICE_PLUGIN_READY: &str = "SandboxDevicePluginReady";
    /// Kata sandbox device plugin DaemonSet (sandbox workloads, `kata` mode).
    pub const KATA_SANDBOX_DEVICE_PLUGIN_READY: &str = "KataSandboxDevicePluginReady";
    /// Sandbox validator DaemonSet (sandbox workloads).
    pub const SANDBOX_VALIDATOR_READY: &str = "SandboxValidatorReady";
    /// vGPU device manager DaemonSet (sandbox workloads).
    pub const VGPU_DEVICE_MANAGER_READY: &str = "VGPUDeviceManagerReady";
    /// vGPU manager DaemonSet, the vGPU host driver (sandbox workloads).
    pub const VGPU_MANAGER_READY: &str = "VGPUManagerReady";
    /// Confidential-computing manager DaemonSet (sandbox workloads, `kata` mode).
    pub const CC_MANAGER_READY: &str = "CCManagerReady";
}

/// Node conditions written by the validator on each GPU node.
pub mod node {
    /// The driver is loaded and `nvidia-smi` works.
    pub const GPU_DRIVER_READY: &str = "GPUDriverReady";
    /// Containers get GPUs through the toolkit.
    pub const GPU_TOOLKIT_READY: &str = "GPUToolkitReady";
    /// A CUDA workload computed the right result on the node's GPUs.
    pub const GPU_CUDA_READY: &str = "GPUCudaReady";
    /// The device plugin advertises the node's GPUs.
    pub const GPU_DEVICE_PLUGIN_READY: &str = "GPUDevicePluginReady";
    /// The whole stack on the node is ready.
    pub const GPU_STACK_READY: &str = "GPUStackReady";
    /// Sandbox (`vm-passthrough`): every NVIDIA GPU is bound to `vfio-pci`.
    pub const GPU_VFIO_PCI_READY: &str = "GPUVfioPciReady";
    /// Sandbox (`vm-vgpu`): the vGPU host driver works and its parent devices are there.
    pub const GPU_VGPU_MANAGER_READY: &str = "GPUVgpuManagerReady";
    /// Sandbox (`vm-vgpu`): vGPU devices exist on the node.
    pub const GPU_VGPU_DEVICES_READY: &str = "GPUVgpuDevicesReady";
    /// Sandbox: the confidential-computing manager set the CC mode the node asks for.
    pub const GPU_CC_MANAGER_READY: &str = "GPUCcManagerReady";
    /// Every condition the validator's sandbox components write (they take no part in
    /// `GPUStackReady`, which is the container stack's).
    pub const SANDBOX_TYPES: [&str; 4] = [
        GPU_VFIO_PCI_READY,
        GPU_VGPU_MANAGER_READY,
        GPU_VGPU_DEVICES_READY,
        GPU_CC_MANAGER_READY,
    ];
    /// The GPU health agent's summary: no GPU of the node has a fault that needs its
    /// administrator (status `Unknown` when the agent cannot read the GPUs).
    pub const GPU_HEALTHY: &str = "GPUHealthy";
    /// An XID whose catalog action is the node's, or the driver's recovery action.
    pub const GPU_XID_ERROR: &str = "GPUXidError";
    /// Uncorrectable GPU memory errors.
    pub const GPU_MEMORY_ERROR: &str = "GPUMemoryError";
    /// A GPU fell off the bus, or fewer GPUs answer than the node advertises.
    pub const GPU_LOST: &str = "GPULost";
    /// Clocks slowed by heat or the power brake (informational).
    pub const GPU_THROTTLED: &str = "GPUThrottled";
    /// Every condition the GPU health agent writes.
    pub const GPU_HEALTH_TYPES: [&str; 5] = [
        GPU_HEALTHY,
        GPU_XID_ERROR,
        GPU_MEMORY_ERROR,
        GPU_LOST,
        GPU_THROTTLED,
    ];
}
