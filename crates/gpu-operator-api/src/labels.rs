//! Names of the node labels and annotations the operator reads and writes, shared with NVIDIA's
//! operator and its operands (GFD, MIG manager, driver manager), so they must not change.

/// `"true"` on nodes with an NVIDIA GPU (from NFD's PCI labels); `"false"` once the GPU is gone.
pub const GPU_PRESENT: &str = "nvidia.com/gpu.present";
/// Prefix of the per-operand scheduling gates `nvidia.com/gpu.deploy.<operand>=true`, used as
/// DaemonSet node selectors.
pub const GPU_DEPLOY_PREFIX: &str = "nvidia.com/gpu.deploy.";
/// `"false"` on a node removes every `nvidia.com/gpu.deploy.*` label: no operand runs there.
pub const GPU_DEPLOY_OPERANDS: &str = "nvidia.com/gpu.deploy.operands";
/// What a node runs with sandbox workloads on: `container`, `vm-passthrough` or `vm-vgpu`.
pub const GPU_WORKLOAD_CONFIG: &str = "nvidia.com/gpu.workload.config";
/// GPU model, written by GPU Feature Discovery.
pub const GPU_PRODUCT: &str = "nvidia.com/gpu.product";
/// `"true"` on nodes whose GPUs support MIG, written by GPU Feature Discovery.
pub const MIG_CAPABLE: &str = "nvidia.com/mig.capable";
/// The MIG layout a node should have; read by the MIG manager.
pub const MIG_CONFIG: &str = "nvidia.com/mig.config";
/// Progress of the MIG manager: `pending`, `rebooting`, `success` or `failed`.
pub const MIG_CONFIG_STATE: &str = "nvidia.com/mig.config.state";
/// Ours: the MIG watchdog's mark on a node whose `nvidia.com/mig.config.state` has been
/// `pending` or `rebooting` (the value) for longer than `migManager.watchdog.timeoutSeconds`.
pub const MIG_STUCK: &str = "nvidia.com/gpu-operator.mig-stuck";
/// The value NVIDIA's MIG manager gives the deploy labels of the GPU operands it pauses.
pub const PAUSED_FOR_MIG_CHANGE: &str = "paused-for-mig-change";
/// The value NVIDIA's driver manager, and our driver upgrade, give the deploy labels of the GPU
/// clients they pause while a node's driver is replaced.
pub const PAUSED_FOR_DRIVER_UPGRADE: &str = "paused-for-driver-upgrade";
/// The node label third-party GPU clients name in their `nodeSelector` (NVIDIA v26.7): `true` on
/// GPU nodes, paused while the node's driver or MIG layout changes, so their pods leave first.
pub const DEPLOY_CLIENT: &str = "nvidia.com/gpu.deploy.client";
/// The sandbox validator's gate: the node labeller sets it on the GPU nodes that run the sandbox
/// (VM) stack, so it tells them apart from those of the container stack.
pub const DEPLOY_SANDBOX_VALIDATOR: &str = "nvidia.com/gpu.deploy.sandbox-validator";
/// `"true"` on nodes whose device plugin configuration uses MPS, written by GPU Feature Discovery.
pub const MPS_CAPABLE: &str = "nvidia.com/mps.capable";
/// The device plugin configuration (ConfigMap key) a node uses.
pub const DEVICE_PLUGIN_CONFIG: &str = "nvidia.com/device-plugin.config";
/// `"true"` on nodes whose GPUs and CPUs can run confidential-computing workloads; the
/// validator's `cc-manager` component checks the CC mode only there.
pub const CC_CAPABLE: &str = "nvidia.com/cc.capable";
/// The confidential-computing mode a node asks NVIDIA's CC manager for: `on`, `off`,
/// `devtools` or `ppcie` (unset: the CC manager's `DEFAULT_CC_MODE`).
pub const CC_MODE: &str = "nvidia.com/cc.mode";
/// The CC mode NVIDIA's CC manager reached on the node (`on`, `off`, `devtools`, `ppcie`;
/// `success` from its earlier releases), or `failed`.
pub const CC_MODE_STATE: &str = "nvidia.com/cc.mode.state";
/// The major version of the node's NVIDIA driver (`580`), as GPU Feature Discovery labels it.
pub const CUDA_DRIVER_MAJOR: &str = "nvidia.com/cuda.driver-version.major";
/// Present on vGPU hosts; such nodes never count as MIG-capable.
pub const VGPU_HOST_DRIVER_VERSION: &str = "nvidia.com/vgpu.host-driver-version";
/// Driver upgrade state of a node, written by the upgrade controller.
pub const DRIVER_UPGRADE_STATE: &str = "nvidia.com/gpu-driver-upgrade-state";
/// `"true"` on a node excludes it from driver upgrades.
pub const DRIVER_UPGRADE_SKIP: &str = "nvidia.com/gpu-driver-upgrade.skip";
/// `"true"` on a pod keeps it from being drained during driver upgrades (the operator's own pod).
pub const DRIVER_UPGRADE_DRAIN_SKIP: &str = "nvidia.com/gpu-driver-upgrade-drain.skip";
/// Owner NVIDIADriver of a node, in NVIDIADriver mode.
pub const DRIVER_OWNER: &str = "nvidia.com/gpu-operator.driver.owner";
/// Ours: how a node's GPUs are offered to pods while a ClusterPolicy and a GPUCluster are both
/// active, set by the user per node pool: `dra` (the GPUCluster's DRA driver publishes them as
/// ResourceSlices) or `device-plugin` (the ClusterPolicy's device plugin advertises
/// `nvidia.com/gpu`; also when absent). With only one of the two, the one present decides.
pub const GPU_RESOURCE_API: &str = "nvidia.com/gpu.resource-api";
/// [`GPU_RESOURCE_API`]'s value for the DRA driver.
pub const RESOURCE_API_DRA: &str = "dra";
/// [`GPU_RESOURCE_API`]'s value for the device plugin.
pub const RESOURCE_API_DEVICE_PLUGIN: &str = "device-plugin";
/// The DRA kubelet plugin's gate (NVIDIA's name): `true` on the nodes whose GPUs DRA serves.
pub const DEPLOY_DRA_DRIVER: &str = "nvidia.com/gpu.deploy.dra-driver";
/// The DRA validator's gate (NVIDIA's name): set with [`DEPLOY_DRA_DRIVER`].
pub const DEPLOY_DRA_VALIDATOR: &str = "nvidia.com/gpu.deploy.dra-validator";
/// The GPUCluster's DCGM host engine's gate (NVIDIA's name): set with [`DEPLOY_DRA_DRIVER`].
pub const DEPLOY_DCGM_DRA: &str = "nvidia.com/gpu.deploy.dcgm-dra";
/// The GPUCluster's DCGM exporter's gate (NVIDIA's name): set with [`DEPLOY_DRA_DRIVER`].
pub const DEPLOY_DCGM_EXPORTER_DRA: &str = "nvidia.com/gpu.deploy.dcgm-exporter-dra";
/// GPU Feature Discovery's count of the node's GPUs.
pub const GPU_COUNT: &str = "nvidia.com/gpu.count";

/// NFD labels whose value `"true"` marks a node with an NVIDIA GPU (PCI vendor 10de, any class,
/// 3D controller, VGA controller).
pub const NFD_GPU_PRESENT: [&str; 3] = [
    "feature.node.kubernetes.io/pci-10de.present",
    "feature.node.kubernetes.io/pci-0302_10de.present",
    "feature.node.kubernetes.io/pci-0300_10de.present",
];
/// Prefix of every NFD label; any of them shows that NFD runs in the cluster.
pub const NFD_PREFIX: &str = "feature.node.kubernetes.io/";
/// NFD label with the OS id, such as `ubuntu` or `rhel`.
pub const NFD_OS_RELEASE_ID: &str = "feature.node.kubernetes.io/system-os_release.ID";
/// NFD label with the OS version, such as `22.04`.
pub const NFD_OS_RELEASE_VERSION_ID: &str =
    "feature.node.kubernetes.io/system-os_release.VERSION_ID";
/// NFD label with the RHCOS ostree version (OpenShift).
pub const NFD_OSTREE_VERSION: &str = "feature.node.kubernetes.io/system-os_release.OSTREE_VERSION";
/// NFD label with the full kernel version.
pub const NFD_KERNEL_VERSION: &str = "feature.node.kubernetes.io/kernel-version.full";

/// The operand names of the `nvidia.com/gpu.deploy.<operand>` labels.
pub mod operand {
    /// Driver container.
    pub const DRIVER: &str = "driver";
    /// Container toolkit.
    pub const CONTAINER_TOOLKIT: &str = "container-toolkit";
    /// Device plugin (and MPS control daemon).
    pub const DEVICE_PLUGIN: &str = "device-plugin";
    /// GPU Feature Discovery.
    pub const GPU_FEATURE_DISCOVERY: &str = "gpu-feature-discovery";
    /// DCGM host engine.
    pub const DCGM: &str = "dcgm";
    /// DCGM exporter.
    pub const DCGM_EXPORTER: &str = "dcgm-exporter";
    /// The GPUCluster's DCGM host engine (`nvidia-dcgm-dra`, the GPUs through DRA), as NVIDIA's:
    /// the gate `nvidia.com/gpu.deploy.dcgm-dra`.
    pub const DCGM_DRA: &str = "dcgm-dra";
    /// The GPUCluster's DCGM exporter (`nvidia-dcgm-exporter-dra`), as NVIDIA's: the gate
    /// `nvidia.com/gpu.deploy.dcgm-exporter-dra`.
    pub const DCGM_EXPORTER_DRA: &str = "dcgm-exporter-dra";
    /// Node status exporter.
    pub const NODE_STATUS_EXPORTER: &str = "node-status-exporter";
    /// Operator validator.
    pub const OPERATOR_VALIDATOR: &str = "operator-validator";
    /// MIG manager (MIG-capable nodes only).
    pub const MIG_MANAGER: &str = "mig-manager";
    /// VFIO manager (`vm-passthrough` nodes, sandbox workloads).
    pub const VFIO_MANAGER: &str = "vfio-manager";
    /// KubeVirt GPU device plugin (`vm-passthrough` and `vm-vgpu` nodes, sandbox workloads in
    /// `kubevirt` mode).
    pub const SANDBOX_DEVICE_PLUGIN: &str = "sandbox-device-plugin";
    /// Kata sandbox device plugin (replaces the KubeVirt one on `vm-passthrough` nodes in `kata`
    /// mode).
    pub const KATA_SANDBOX_DEVICE_PLUGIN: &str = "kata-sandbox-device-plugin";
    /// Sandbox validator (`vm-passthrough` and `vm-vgpu` nodes, sandbox workloads).
    pub const SANDBOX_VALIDATOR: &str = "sandbox-validator";
    /// vGPU device manager (`vm-vgpu` nodes, sandbox workloads).
    pub const VGPU_DEVICE_MANAGER: &str = "vgpu-device-manager";
    /// vGPU manager, the vGPU host driver (`vm-vgpu` nodes, sandbox workloads).
    pub const VGPU_MANAGER: &str = "vgpu-manager";
    /// Confidential-computing manager (`vm-passthrough` and `vm-vgpu` nodes, sandbox workloads
    /// in `kata` mode).
    pub const CC_MANAGER: &str = "cc-manager";
    /// GPU clients in general; paused by the MIG manager during a MIG change.
    pub const CLIENT: &str = "client";
    /// The DRA driver's kubelet plugin (GPUCluster; the nodes whose resource API is `dra`).
    pub const DRA_DRIVER: &str = "dra-driver";
    /// The DRA validator (GPUCluster; with the DRA driver).
    pub const DRA_VALIDATOR: &str = "dra-validator";
}

/// Annotation with the hash of the rendered DaemonSet (NVIDIA's change detection).
pub const LAST_APPLIED_HASH: &str = "nvidia.com/last-applied-hash";
/// Node annotation `"true"` while the operator manages driver upgrades on the node; read by the
/// driver manager.
pub const DRIVER_UPGRADE_ENABLED: &str = "nvidia.com/gpu-driver-upgrade-enabled";
/// Node annotation recording that a node was cordoned before its driver upgrade began.
pub const DRIVER_UPGRADE_INITIAL_UNSCHEDULABLE: &str =
    "nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable";

/// `app.kubernetes.io/name` of the objects the operator creates.
pub const APP_NAME: &str = "app.kubernetes.io/name";
/// `app.kubernetes.io/component`: which operand an object belongs to.
pub const APP_COMPONENT: &str = "app.kubernetes.io/component";
/// `app.kubernetes.io/managed-by`.
pub const APP_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// `app.kubernetes.io/part-of`.
pub const APP_PART_OF: &str = "app.kubernetes.io/part-of";
/// NVIDIA's `app` label, used by the operand DaemonSets' selectors.
pub const APP: &str = "app";
/// Value of `app.kubernetes.io/managed-by` and `app.kubernetes.io/part-of`.
pub const MANAGED_BY_VALUE: &str = "gpu-operator";

/// Pod Security Admission labels set on the operator's namespace with `psa.enabled`.
pub const POD_SECURITY_LABELS: [&str; 3] = [
    "pod-security.kubernetes.io/enforce",
    "pod-security.kubernetes.io/audit",
    "pod-security.kubernetes.io/warn",
];
