//! The `ClusterPolicy` custom resource (`clusterpolicies.nvidia.com/v1`, cluster-scoped): the
//! root spec with its top-level sections.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::spec::{
    CcManagerSpec, CdiSpec, DaemonsetsSpec, DcgmExporterSpec, DcgmSpec, DevicePluginSpec,
    DriverSpec, GdrCopySpec, GdsSpec, GfdSpec, HostPathsSpec, KataManagerSpec,
    KataSandboxDevicePluginSpec, MigManagerSpec, MigSpec, NodeStatusExporterSpec, OperatorSpec,
    PsaSpec, PspSpec, SandboxDevicePluginSpec, SandboxMode, SandboxWorkloadsSpec, ToolkitSpec,
    ValidatorSpec, VfioManagerSpec, VgpuDeviceManagerSpec, VgpuManagerSpec, WorkloadConfig,
};
use crate::status::ClusterPolicyStatus;

/// The desired GPU software stack of the cluster: which NVIDIA components run on GPU nodes, with
/// which images and settings. One ClusterPolicy is active per cluster (the oldest).
///
/// The sections `operator`, `daemonsets`, `driver`, `toolkit`, `devicePlugin`, `dcgmExporter`,
/// `dcgm`, `nodeStatusExporter` and `gfd` are required; each may be empty (`{}`).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "nvidia.com",
    version = "v1",
    kind = "ClusterPolicy",
    plural = "clusterpolicies",
    singular = "clusterpolicy",
    status = "ClusterPolicyStatus",
    derive = "Default",
    derive = "PartialEq",
    doc = "ClusterPolicy configures the NVIDIA GPU software stack (driver, container toolkit, device plugin, monitoring, MIG) that the GPU operator deploys on every GPU node.",
    printcolumn(name = "Status", type_ = "string", json_path = ".status.state"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::cel::cluster_policy_spec)]
pub struct ClusterPolicySpec {
    /// Settings of the operator itself: runtime class, metrics, labels and annotations of what
    /// it creates. Required; may be empty.
    pub operator: OperatorSpec,
    /// Settings applied to every operand DaemonSet: tolerations, priority class, labels,
    /// annotations, update strategy, pod security context. Required; may be empty.
    pub daemonsets: DaemonsetsSpec,
    /// The NVIDIA driver container, which builds or loads the kernel driver on each GPU node.
    /// Required; may be empty (then the driver is deployed with the default image).
    pub driver: DriverSpec,
    /// The NVIDIA Container Toolkit, which configures the node's container runtime (containerd,
    /// CRI-O) to expose GPUs to containers. Required; may be empty.
    pub toolkit: ToolkitSpec,
    /// The Kubernetes device plugin, which advertises GPUs (`nvidia.com/gpu`) to the kubelet,
    /// and the MPS control daemon. Required; may be empty.
    pub device_plugin: DevicePluginSpec,
    /// The DCGM exporter, which publishes GPU metrics for Prometheus on port 9400. Required; may
    /// be empty.
    pub dcgm_exporter: DcgmExporterSpec,
    /// A standalone DCGM host engine (`nv-hostengine`) shared by the exporter and other clients.
    /// Required; may be empty.
    pub dcgm: DcgmSpec,
    /// The node status exporter, which publishes the validator's per-node results as metrics.
    /// Required; may be empty.
    pub node_status_exporter: NodeStatusExporterSpec,
    /// GPU Feature Discovery, which labels each node with its GPUs' properties (product, memory,
    /// MIG and sharing capabilities). Required; may be empty.
    pub gfd: GfdSpec,
    /// How MIG devices are advertised to Kubernetes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mig: Option<MigSpec>,
    /// The MIG manager, which partitions MIG-capable GPUs as the `nvidia.com/mig.config` node
    /// label asks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mig_manager: Option<MigManagerSpec>,
    /// Deprecated and ignored: PodSecurityPolicies no longer exist in Kubernetes. Kept so older
    /// ClusterPolicies still apply.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub psp: Option<PspSpec>,
    /// Pod Security Admission labels on the operator's namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub psa: Option<PsaSpec>,
    /// The operator validator, which checks driver, toolkit, CUDA and device plugin on each node
    /// and gates the other operands until they work.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub validator: Option<ValidatorSpec>,
    /// GPUDirect Storage: the `nvidia-fs` kernel module, loaded by a sidecar of the driver pod.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gds: Option<GdsSpec>,
    /// GDRCopy: the `gdrdrv` kernel module, loaded by a sidecar of the driver pod.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gdrcopy: Option<GdrCopySpec>,
    /// Virtual-machine workloads (KubeVirt or Kata) on GPU nodes, chosen per node with the
    /// `nvidia.com/gpu.workload.config` label.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox_workloads: Option<SandboxWorkloadsSpec>,
    /// The VFIO manager, which binds GPUs to `vfio-pci` for GPU passthrough to virtual machines.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vfio_manager: Option<VfioManagerSpec>,
    /// The KubeVirt GPU device plugin, which advertises passthrough GPUs and vGPUs to KubeVirt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox_device_plugin: Option<SandboxDevicePluginSpec>,
    /// The vGPU manager, the host driver for NVIDIA vGPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vgpu_manager: Option<VgpuManagerSpec>,
    /// The vGPU device manager, which creates vGPU devices as the `nvidia.com/vgpu.config` node
    /// label asks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vgpu_device_manager: Option<VgpuDeviceManagerSpec>,
    /// Container Device Interface (CDI) mode of the container toolkit and device plugin.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cdi: Option<CdiSpec>,
    /// Deprecated: the Kata manager is no longer deployed. Kept so older ClusterPolicies still
    /// apply.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kata_manager: Option<KataManagerSpec>,
    /// The confidential-computing manager, which sets the CC mode of GPUs for Kata workloads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cc_manager: Option<CcManagerSpec>,
    /// Paths on the host that the operands mount.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_paths: Option<HostPathsSpec>,
    /// The Kata sandbox device plugin, which advertises passthrough GPUs to Kata containers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kata_sandbox_device_plugin: Option<KataSandboxDevicePluginSpec>,
}

impl ClusterPolicySpec {
    /// Whether the operator deploys the driver (`driver.enabled`, default true).
    #[must_use]
    pub fn driver_enabled(&self) -> bool {
        self.driver.enabled != Some(false)
    }

    /// Whether the operator deploys the container toolkit (`toolkit.enabled`, default true).
    #[must_use]
    pub fn toolkit_enabled(&self) -> bool {
        self.toolkit.enabled != Some(false)
    }

    /// Whether the operator deploys the device plugin (`devicePlugin.enabled`, default true).
    #[must_use]
    pub fn device_plugin_enabled(&self) -> bool {
        self.device_plugin.enabled != Some(false)
    }

    /// Whether GPUDirect Storage is on (`gds.enabled`, default false).
    #[must_use]
    pub fn gds_enabled(&self) -> bool {
        self.gds.as_ref().and_then(|g| g.enabled) == Some(true)
    }

    /// Whether GDRCopy is on (`gdrcopy.enabled`, default false).
    #[must_use]
    pub fn gdrcopy_enabled(&self) -> bool {
        self.gdrcopy.as_ref().and_then(|g| g.enabled) == Some(true)
    }

    /// Whether sandbox (virtual-machine) workloads are on (`sandboxWorkloads.enabled`, default
    /// false).
    #[must_use]
    pub fn sandbox_enabled(&self) -> bool {
        self.sandbox_workloads.as_ref().and_then(|s| s.enabled) == Some(true)
    }

    /// The workload config of a GPU node without a valid `nvidia.com/gpu.workload.config` label:
    /// `sandboxWorkloads.defaultWorkload` (`container` unless set) with sandbox workloads on,
    /// `None` without them (every node runs containers, whatever its label).
    #[must_use]
    pub fn sandbox_default_workload(&self) -> Option<WorkloadConfig> {
        self.sandbox_workloads
            .as_ref()
            .filter(|_| self.sandbox_enabled())
            .map(|s| s.default_workload.unwrap_or_default())
    }

    /// Whether the operator deploys the sandbox validator: sandbox workloads on, nothing else
    /// (NVIDIA's rule: the sandbox validator has no `enabled` switch of its own).
    #[must_use]
    pub fn sandbox_validator_enabled(&self) -> bool {
        self.sandbox_enabled()
    }

    /// Whether the confidential-computing manager is asked for (`ccManager.enabled`, default
    /// false), so the sandbox validator checks its work (NVIDIA's rule, whatever the sandbox).
    #[must_use]
    pub fn cc_manager_enabled(&self) -> bool {
        self.cc_manager.as_ref().and_then(|c| c.enabled) == Some(true)
    }

    /// Whether the operator deploys the vGPU device manager: sandbox workloads on and
    /// `vgpuDeviceManager.enabled` true (NVIDIA's default is false; its chart sets true).
    #[must_use]
    pub fn vgpu_device_manager_enabled(&self) -> bool {
        self.sandbox_enabled()
            && self.vgpu_device_manager.as_ref().and_then(|v| v.enabled) == Some(true)
    }

    /// Whether the operator deploys the VFIO manager: sandbox workloads on and
    /// `vfioManager.enabled` true (NVIDIA's default is false; its chart sets true).
    #[must_use]
    pub fn vfio_manager_enabled(&self) -> bool {
        self.sandbox_enabled() && self.vfio_manager.as_ref().and_then(|v| v.enabled) == Some(true)
    }

    /// Whether the operator deploys the vGPU manager: sandbox workloads on and
    /// `vgpuManager.enabled` true (NVIDIA's default is false, its chart's too). With
    /// `driver.useNvidiaDriverCRD` NVIDIADriver objects deploy it instead (NVIDIA skips the
    /// state), which the operand checks.
    #[must_use]
    pub fn vgpu_manager_enabled(&self) -> bool {
        self.sandbox_enabled() && self.vgpu_manager.as_ref().and_then(|v| v.enabled) == Some(true)
    }

    /// Whether the operator deploys the confidential-computing manager: sandbox workloads on in
    /// `kata` mode and `ccManager.enabled` true (NVIDIA's `state-cc-manager` rule; its default is
    /// false, its chart sets true).
    #[must_use]
    pub fn cc_manager_deployed(&self) -> bool {
        self.sandbox_enabled()
            && self.sandbox_mode() == SandboxMode::Kata
            && self.cc_manager_enabled()
    }

    /// `sandboxWorkloads.mode` (`kubevirt` when unset, NVIDIA's CRD default).
    #[must_use]
    pub fn sandbox_mode(&self) -> SandboxMode {
        self.sandbox_workloads
            .as_ref()
            .and_then(|s| s.mode)
            .unwrap_or_default()
    }

    /// Whether the operator deploys the KubeVirt GPU device plugin: sandbox workloads on in
    /// `kubevirt` mode and `sandboxDevicePlugin.enabled` true (NVIDIA's default is false; its
    /// chart sets true).
    #[must_use]
    pub fn sandbox_device_plugin_enabled(&self) -> bool {
        self.sandbox_enabled()
            && self.sandbox_mode() == SandboxMode::Kubevirt
            && self.sandbox_device_plugin.as_ref().and_then(|p| p.enabled) == Some(true)
    }

    /// Whether the operator deploys the Kata sandbox device plugin: sandbox workloads on in
    /// `kata` mode and `kataSandboxDevicePlugin.enabled` true (NVIDIA's default is false; its
    /// chart sets true).
    #[must_use]
    pub fn kata_sandbox_device_plugin_enabled(&self) -> bool {
        self.sandbox_enabled()
            && self.sandbox_mode() == SandboxMode::Kata
            && self
                .kata_sandbox_device_plugin
                .as_ref()
                .and_then(|p| p.enabled)
                == Some(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{GdrCopySpec, GdsSpec};

    #[test]
    fn operands_default_on_and_gds_gdrcopy_default_off() {
        // NVIDIA's API: driver, toolkit and device plugin deploy unless disabled; GDS and
        // GDRCopy only when enabled.
        let mut spec = ClusterPolicySpec::default();
        assert!(spec.driver_enabled() && spec.toolkit_enabled() && spec.device_plugin_enabled());
        assert!(!spec.gds_enabled() && !spec.gdrcopy_enabled());
        spec.driver.enabled = Some(false);
        spec.toolkit.enabled = Some(false);
        spec.device_plugin.enabled = Some(false);
        assert!(!spec.driver_enabled() && !spec.toolkit_enabled() && !spec.device_plugin_enabled());
        spec.gds = Some(GdsSpec {
            enabled: Some(true),
            ..GdsSpec::default()
        });
        spec.gdrcopy = Some(GdrCopySpec {
            enabled: Some(true),
            ..GdrCopySpec::default()
        });
        assert!(spec.gds_enabled() && spec.gdrcopy_enabled());
    }
}
