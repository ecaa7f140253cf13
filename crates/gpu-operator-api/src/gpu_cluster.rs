//! The `GPUCluster` custom resource (`gpuclusters.nvidia.com/v1alpha1`, cluster-scoped, a
//! singleton named `gpu-cluster`): the DRA-based GPU stack as NVIDIA's operator serves it since
//! v26.7 — the DRA driver for GPUs (its kubelet plugin, the ComputeDomain controller, the
//! DeviceClasses and the ResourceSlice admission policy), DCGM and the DCGM exporter, and a DRA
//! validator. It installs neither the driver nor the device plugin: the driver is on the host or
//! comes from NVIDIADrivers.
//!
//! The fields, defaults and the name rule are NVIDIA's (v26.7), so GPUClusters written for
//! NVIDIA's operator apply unchanged and keep every field. The DCGM, DCGM exporter and DaemonSet
//! sections use the ClusterPolicy's Rust types; the DRA driver's are in [`dra`]. [`claims`] reads
//! which ResourceClaims hold the DRA driver's devices (its teardown and a node's switch wait
//! for them).

pub mod claims;
pub mod dra;
mod status;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::spec::{DaemonsetsSpec, DcgmExporterSpec, DcgmSpec};

pub use dra::{
    DraComputeDomainsSpec, DraControllerSpec, DraDriverSpec, DraGpusSpec, DraHealthcheckSpec,
    DraKubeletPluginSpec,
};
pub use status::{GpuClusterState, GpuClusterStatus};

/// Name of the GPUCluster CRD.
pub const CRD_NAME: &str = "gpuclusters.nvidia.com";
/// The one name a GPUCluster may have (NVIDIA's rule; its chart's `gpuCluster.deployCR` creates
/// it).
pub const NAME: &str = "gpu-cluster";
/// NVIDIA's finalizer on the GPUCluster: its teardown waits for the DRA claims on our devices.
pub const FINALIZER: &str = "gpucluster.nvidia.com/dra-resourceclaim";

/// The DRA-based GPU stack of the cluster: the DRA driver for GPUs, DCGM, the DCGM exporter.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "nvidia.com",
    version = "v1alpha1",
    kind = "GPUCluster",
    root = "GpuCluster",
    plural = "gpuclusters",
    singular = "gpucluster",
    shortname = "gc",
    status = "GpuClusterStatus",
    derive = "Default",
    derive = "PartialEq",
    doc = "GPUCluster deploys the DRA-based GPU stack: the NVIDIA DRA driver for GPUs (kubelet plugin, ComputeDomain controller, DeviceClasses), DCGM and the DCGM exporter. One per cluster, named gpu-cluster.",
    validation = kube::core::Rule::new("self.metadata.name == 'gpu-cluster'").message("GPUCluster is a singleton: metadata.name must be 'gpu-cluster'"),
    printcolumn(name = "Status", type_ = "string", json_path = ".status.state"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::schema::tidy)]
pub struct GpuClusterSpec {
    /// The NVIDIA DRA driver for GPUs: the `gpus` capability (`gpu.nvidia.com`,
    /// `mig.nvidia.com`, `vfio.gpu.nvidia.com`) is always deployed; `computeDomains` has its own
    /// switch.
    #[serde(default)]
    pub dra_driver: DraDriverSpec,
    /// The standalone DCGM host engine. Disabled unless `enabled: true` (the exporter then runs
    /// its embedded host engine).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dcgm: Option<DcgmSpec>,
    /// The DCGM exporter. Enabled unless `enabled: false`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dcgm_exporter: Option<DcgmExporterSpec>,
    /// Host paths the pods mount.
    #[serde(default, skip_serializing_if = "GpuClusterHostPaths::is_empty")]
    pub host_paths: GpuClusterHostPaths,
    /// Settings shared by every DaemonSet this GPUCluster deploys.
    #[serde(default, skip_serializing_if = "is_default")]
    pub daemonsets: DaemonsetsSpec,
}

fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

impl GpuClusterSpec {
    /// Whether the standalone DCGM host engine is deployed: only with `dcgm.enabled: true`.
    #[must_use]
    pub fn dcgm_enabled(&self) -> bool {
        self.dcgm.as_ref().and_then(|d| d.enabled) == Some(true)
    }

    /// Whether the DCGM exporter is deployed: unless `dcgmExporter.enabled: false`.
    #[must_use]
    pub fn dcgm_exporter_enabled(&self) -> bool {
        self.dcgm_exporter.as_ref().and_then(|d| d.enabled) != Some(false)
    }
}

/// Paths on the host the GPUCluster's pods mount. The host root is `/`: NVIDIA's API has no
/// `rootFS` here, yet its sample sets `rootFS: "/"`, so `/` is accepted (and kept, not pruned)
/// and any other root refused.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = host_paths_rules)]
pub struct GpuClusterHostPaths {
    /// The host's root as the pods see it: only `/` (the DRA stack mounts the host root there).
    #[serde(rename = "rootFS", skip_serializing_if = "Option::is_none")]
    pub root_fs: Option<String>,
    /// Where the driver's files (libraries, binaries) are on the host: `/run/nvidia/driver` for
    /// a containerized driver (the default), `/` for a driver installed on the host.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver_install_dir: Option<String>,
    /// The kubelet's root directory, where the kubelet plugin registers and keeps its sockets.
    /// Defaults to `/var/lib/kubelet`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = GpuClusterHostPaths::DEFAULT_KUBELET_ROOT_DIR))]
    pub kubelet_root_dir: Option<String>,
}

impl GpuClusterHostPaths {
    /// The driver's host directory when `driverInstallDir` is unset or empty (the ClusterPolicy's).
    pub const DEFAULT_DRIVER_INSTALL_DIR: &'static str =
        crate::spec::HostPathsSpec::DEFAULT_DRIVER_INSTALL_DIR;
    /// The kubelet's root directory when `kubeletRootDir` is unset or empty (the ClusterPolicy's).
    pub const DEFAULT_KUBELET_ROOT_DIR: &'static str =
        crate::spec::HostPathsSpec::DEFAULT_KUBELET_ROOT_DIR;

    /// Whether nothing is set.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// The driver's host directory.
    #[must_use]
    pub fn driver_install_dir(&self) -> &str {
        non_empty(self.driver_install_dir.as_deref()).unwrap_or(Self::DEFAULT_DRIVER_INSTALL_DIR)
    }

    /// The kubelet's root directory, without a trailing `/`.
    #[must_use]
    pub fn kubelet_root_dir(&self) -> &str {
        non_empty(self.kubelet_root_dir.as_deref()).map_or(Self::DEFAULT_KUBELET_ROOT_DIR, |dir| {
            if dir.len() > 1 {
                dir.trim_end_matches('/')
            } else {
                dir
            }
        })
    }
}

/// Ours: `rootFS` other than `/` is refused rather than ignored; the other paths are absolute.
const ROOT_FS_IS_SLASH: crate::cel::CelRule = crate::cel::CelRule {
    rule: "!has(self.rootFS) || self.rootFS == '/'",
    message: "hostPaths.rootFS: the GPUCluster's DRA stack mounts the host root at /, which cannot be changed: remove rootFS or set it to /",
    field_path: Some(".rootFS"),
};

fn host_paths_rules(schema: &mut schemars::Schema) {
    crate::schema::add_rules(
        schema,
        &[
            ROOT_FS_IS_SLASH,
            crate::cel::HOST_PATHS_ABSOLUTE[1],
            crate::cel::HOST_PATHS_ABSOLUTE[2],
        ],
    );
}

fn non_empty(value: Option<&str>) -> Option<&str> {
    value.filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use kube::CustomResourceExt as _;

    use super::*;

    #[test]
    fn nvidias_sample_reads_with_its_defaults() {
        let cluster: GpuCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "nvidia.com/v1alpha1",
            "kind": "GPUCluster",
            "metadata": {"name": "gpu-cluster"},
            "spec": {
                "draDriver": {"repository": "nvcr.io/nvidia", "image": "dra-driver-nvidia-gpu", "version": "v0.5.0",
                    "computeDomains": {"enabled": true}},
                "dcgmExporter": {"enabled": true},
                "hostPaths": {"driverInstallDir": "/run/nvidia/driver"}
            }
        }))
        .unwrap();
        assert!(cluster.spec.dra_driver.compute_domains_enabled());
        assert!(cluster.spec.dcgm_exporter_enabled() && !cluster.spec.dcgm_enabled());
        assert_eq!(
            cluster.spec.host_paths.kubelet_root_dir(),
            "/var/lib/kubelet"
        );
        assert_eq!(
            cluster.spec.host_paths.driver_install_dir(),
            "/run/nvidia/driver"
        );
    }

    #[test]
    fn the_crd_keeps_nvidias_name_rule_and_short_name() {
        let crd = serde_json::to_value(GpuCluster::crd()).unwrap();
        assert_eq!(crd["metadata"]["name"], CRD_NAME);
        assert_eq!(crd["spec"]["names"]["shortNames"][0], "gc");
        let rules =
            &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["x-kubernetes-validations"];
        assert_eq!(rules[0]["rule"], "self.metadata.name == 'gpu-cluster'");
    }
}
