//! The `NVIDIADriver` custom resource (`nvidiadrivers.nvidia.com/v1alpha1`, cluster-scoped): one
//! driver configuration for a pool of GPU nodes, as NVIDIA's operator serves it since v23.9.
//!
//! The fields, enums, defaults and required fields are NVIDIA's (v26.7), so NVIDIADrivers written
//! for NVIDIA's operator apply unchanged and keep every field. The sections the CR shares with
//! `ClusterPolicy.spec.driver` (image, probes, GDS, GDRCopy, RDMA, manager, certificates, kernel
//! module parameters, upgrade policy) use the same Rust types; the three whose JSON differs live
//! in [`config`]. The schema's CEL rules are in [`cel`].

pub mod cel;
mod config;
mod status;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeAffinity, PodSecurityContext, Toleration};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::spec::{
    ContainerProbeSpec, ContainerSpec, DriverCertConfigSpec, DriverManagerSpec,
    DriverUpgradePolicySpec, GdrCopySpec, GdsSpec, GpuDirectRdmaSpec, ImageSpec,
    KernelModuleConfigSpec, KernelModuleType,
};

pub use config::{
    DriverType, NvidiaDriverLicensingConfig, NvidiaDriverRepoConfig,
    NvidiaDriverVirtualTopologyConfig,
};
pub use status::{NvidiaDriverState, NvidiaDriverStatus};

/// Name of the NVIDIADriver CRD.
pub const CRD_NAME: &str = "nvidiadrivers.nvidia.com";
/// Name of the NVIDIADriver NVIDIA's chart creates with `driver.nvidiaDriverCRD.deployDefaultCR`.
pub const DEFAULT_CR_NAME: &str = "default";
/// The image of a driver whose `image` is unset (the API server's default).
pub const DEFAULT_IMAGE: &str = "nvcr.io/nvidia/driver";

/// One driver configuration (type, version, kernel modules, add-ons, pod settings) for the GPU
/// nodes that `nodeSelector` and `nodeAffinity` select; with `default: true`, for every GPU node
/// that no other NVIDIADriver selects.
///
/// `driverType` and `usePrecompiled` cannot change once the object exists: a different driver
/// type or build is a new NVIDIADriver.
#[allow(
    clippy::duplicated_attributes,
    reason = "two printer columns of type string: the lint reads kube's repeated `type_` as one"
)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "nvidia.com",
    version = "v1alpha1",
    kind = "NVIDIADriver",
    root = "NvidiaDriver",
    plural = "nvidiadrivers",
    singular = "nvidiadriver",
    shortname = "nvd",
    shortname = "nvdriver",
    shortname = "nvdrivers",
    status = "NvidiaDriverStatus",
    derive = "Default",
    derive = "PartialEq",
    doc = "NVIDIADriver deploys one NVIDIA driver configuration (type, version, kernel modules, GPUDirect add-ons) on the GPU nodes it selects, so node pools can run different drivers.",
    printcolumn(name = "Status", type_ = "string", json_path = ".status.state"),
    printcolumn(name = "Default", type_ = "boolean", json_path = ".spec.default"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "Message",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].message",
        description = "Ours (kubectl get -o wide): the Ready condition's ready/desired nodes and first problem nodes",
        priority = 1
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = cel::spec)]
pub struct NvidiaDriverSpec {
    /// Serve every GPU node that no other NVIDIADriver selects. At most one NVIDIADriver should
    /// be the default, and it has no `nodeSelector`. Defaults to false.
    #[serde(default)]
    pub default: bool,
    /// Which driver to run: `gpu` (the data-center driver, the default), `vgpu` (the vGPU guest
    /// driver, licensed through `licensingConfig`) or `vgpu-host-manager` (the vGPU manager of
    /// hypervisor hosts). Cannot change once set: create a new NVIDIADriver instead.
    #[serde(default)]
    pub driver_type: DriverType,
    /// Use precompiled driver images, one per kernel version (`version` is then a driver
    /// branch, such as `595`), instead of compiling the driver on the node. Defaults to false.
    /// Cannot change once the object exists: create a new NVIDIADriver instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub use_precompiled: Option<bool>,
    /// Deprecated and ignored, as by NVIDIA's operator: use `kernelModuleType: open`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub use_open_kernel_modules: Option<bool>,
    /// Which kernel modules to load: `auto` (the default: the driver picks what suits the GPUs
    /// and the driver branch), `open` or `proprietary`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "auto"))]
    pub kernel_module_type: Option<KernelModuleType>,
    /// Startup probe of the driver container; compiling and loading the driver may take
    /// minutes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub startup_probe: Option<ContainerProbeSpec>,
    /// Liveness probe of the driver container.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub liveness_probe: Option<ContainerProbeSpec>,
    /// Readiness probe of the driver container.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub readiness_probe: Option<ContainerProbeSpec>,
    /// GPUDirect RDMA: load `nvidia-peermem` so network adapters can reach GPU memory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rdma: Option<GpuDirectRdmaSpec>,
    /// GPUDirect Storage: the `nvidia-fs` sidecar of the driver pod. Not with precompiled
    /// drivers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gds: Option<GdsSpec>,
    /// GDRCopy: the `gdrdrv` sidecar of the driver pod. Not with precompiled drivers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gdrcopy: Option<GdrCopySpec>,
    /// Image of the driver container: `repository`, `image` (defaults to
    /// `nvcr.io/nvidia/driver`) and `version`, or `image` alone as a full reference with a tag
    /// or digest. The node's OS (such as `ubuntu22.04`) is appended to the tag, and with
    /// `usePrecompiled` the kernel version too, unless `version` is a digest.
    #[serde(flatten)]
    pub image: ImageSpec,
    /// The k8s-driver-manager init container, which prepares a node before the driver starts.
    /// Its image defaults to the operator's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub manager: Option<DriverManagerSpec>,
    /// Resources, arguments and environment of the driver container.
    #[serde(flatten)]
    pub container: ContainerSpec,
    /// Package repository configuration for compiling the driver behind a proxy or mirror.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repo_config: Option<NvidiaDriverRepoConfig>,
    /// Custom CA certificates for reaching the package repositories.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cert_config: Option<DriverCertConfigSpec>,
    /// vGPU guest licensing (`driverType: vgpu`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub licensing_config: Option<NvidiaDriverLicensingConfig>,
    /// Virtual topology daemon configuration of vGPU guests.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub virtual_topology_config: Option<NvidiaDriverVirtualTopologyConfig>,
    /// Custom kernel module parameters for the driver.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_module_config: Option<KernelModuleConfigSpec>,
    /// Name of a Secret in the operator's namespace whose keys are set as environment variables
    /// of the driver container.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_env: Option<String>,
    /// How driver upgrades of this NVIDIADriver's nodes roll through them (cordon, drain,
    /// restart, validate). Unlike the ClusterPolicy's, `autoUpgrade` defaults to true here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upgrade_policy: Option<DriverUpgradePolicySpec>,
    /// Node labels that select the nodes of this driver, such as
    /// `nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3`; unset selects every GPU node. Not with
    /// `default: true`, and not the operator's owner label `nvidia.com/gpu-operator.driver.owner`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,
    /// Node affinity of the driver pods, narrowing the nodes `nodeSelector` selects.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_affinity: Option<NodeAffinity>,
    /// Labels added to the driver DaemonSets and their pods.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    /// Annotations added to the driver DaemonSets and their pods.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
    /// Tolerations of the driver pods.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<Toleration>>,
    /// PriorityClass of the driver pods, such as `system-node-critical`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
    /// Pod-level security context of the driver pods.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_security_context: Option<PodSecurityContext>,
    /// Run the driver pods in the node's network namespace. Defaults to false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_network: Option<bool>,
}

impl NvidiaDriverSpec {
    /// Whether this NVIDIADriver selects a node with `labels` by its `nodeSelector` (none selects
    /// every node; the default one selects only the nodes no other selects, which this cannot
    /// tell, so it says false).
    pub fn selects(&self, labels: &BTreeMap<String, String>) -> bool {
        self.selects_by(|key| labels.get(key).map(String::as_str))
    }

    /// [`Self::selects`] for a node whose labels `label` looks up one by one (the caches' compact
    /// label maps, read without copying them).
    pub fn selects_by<'a>(&self, label: impl Fn(&str) -> Option<&'a str>) -> bool {
        !self.default
            && self
                .node_selector
                .iter()
                .flatten()
                .all(|(key, value)| label(key) == Some(value.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_spec_reads_as_nvidias_defaults() {
        // What the API server stores for `spec: {}` once its defaults are applied, read back:
        // the field values of NVIDIA's CRD (default false, driverType gpu).
        let spec: NvidiaDriverSpec =
            serde_json::from_value(serde_json::json!({ "image": "nvcr.io/nvidia/driver" }))
                .unwrap();
        assert!(!spec.default);
        assert_eq!(spec.driver_type, DriverType::Gpu);
        assert!(spec.use_precompiled.is_none() && spec.gds.is_none() && spec.gdrcopy.is_none());
        assert_eq!(spec.image.name(), Some("nvcr.io/nvidia/driver"));
    }
}
