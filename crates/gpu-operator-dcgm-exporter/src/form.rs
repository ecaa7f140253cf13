//! [`Form`]: what tells the ClusterPolicy's exporter (`nvidia-dcgm-exporter`) from the
//! GPUCluster's (`nvidia-dcgm-exporter-dra`): their names, deploy gates, the host engine they
//! reach, how their pods reach the GPUs and what they read from the API server. Everything else
//! renders alike.

use gpu_operator_api::labels::operand;
use gpu_operator_core::{build::runtime_class::GpuAccess, contract::Operand as _};

use crate::{DRA_NAME, DRA_READ_PODS, DcgmExporter, DcgmExporterDra, NAME, READ_PODS};

/// Name of the GPUCluster's admin-access ResourceClaimTemplate, as NVIDIA's.
pub const ADMIN_CLAIM_TEMPLATE: &str = "nvidia-dcgm-exporter-admin";
/// The exporter's switch that resolves DRA-allocated devices (the kubelet names them by pool and
/// device, not by GPU UUID) through a ResourceSlice informer, so metrics keep their pod labels.
pub const ENABLE_DRA_ENV: &str = "KUBERNETES_ENABLE_DRA";

/// Whose exporter is rendered.
#[derive(Clone, Debug, PartialEq)]
pub enum Form {
    /// The ClusterPolicy's: after the node's toolkit validation, the GPUs through the NVIDIA
    /// runtime.
    ClusterPolicy {
        /// The validator image, which runs the `toolkit-validation` barrier.
        validator_image: String,
        /// How the pods reach the GPUs (RuntimeClass or NRI annotation).
        gpu_access: GpuAccess,
    },
    /// The GPUCluster's, as NVIDIA's: every GPU of the node through an admin-access DRA claim
    /// ([`ADMIN_CLAIM_TEMPLATE`]), [`ENABLE_DRA_ENV`], and always the API access that needs
    /// (pods and ResourceSlices cluster-wide, ResourceClaims in the operator namespace).
    GpuCluster,
}

impl Form {
    /// Name of the DaemonSet, Service, ServiceMonitor, ServiceAccount, Role and their `app` label.
    pub fn name(&self) -> &'static str {
        match self {
            Self::ClusterPolicy { .. } => NAME,
            Self::GpuCluster => DRA_NAME,
        }
    }

    /// The reconciler that owns the objects (`app.kubernetes.io/component`).
    pub fn component(&self) -> &'static str {
        match self {
            Self::ClusterPolicy { .. } => DcgmExporter::NAME,
            Self::GpuCluster => DcgmExporterDra::NAME,
        }
    }

    /// Operand of the `nvidia.com/gpu.deploy.<operand>` gate.
    pub fn deploy_label(&self) -> &'static str {
        match self {
            Self::ClusterPolicy { .. } => operand::DCGM_EXPORTER,
            Self::GpuCluster => operand::DCGM_EXPORTER_DRA,
        }
    }

    /// The ClusterRole (and binding) that lets the exporter read pods.
    pub fn read_pods(&self) -> &'static str {
        match self {
            Self::ClusterPolicy { .. } => READ_PODS,
            Self::GpuCluster => DRA_READ_PODS,
        }
    }

    /// The standalone host engine's Service of the same owner (`nvidia-dcgm`, `nvidia-dcgm-dra`).
    pub fn host_engine_service(&self) -> &'static str {
        match self {
            Self::ClusterPolicy { .. } => "nvidia-dcgm",
            Self::GpuCluster => "nvidia-dcgm-dra",
        }
    }

    /// Whether this is the GPUCluster's exporter.
    pub fn is_dra(&self) -> bool {
        *self == Self::GpuCluster
    }
}
