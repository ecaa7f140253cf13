//! [`Form`]: what tells the ClusterPolicy's host engine (`nvidia-dcgm`) from the GPUCluster's
//! (`nvidia-dcgm-dra`): their names, deploy gates and how their pods reach the GPUs. Everything
//! else renders alike.

use gpu_operator_api::labels::operand;
use gpu_operator_core::{build::runtime_class::GpuAccess, contract::Operand as _};

use crate::{DRA_NAME, Dcgm, DcgmDra, NAME};

/// Name of the GPUCluster's admin-access ResourceClaimTemplate, as NVIDIA's.
pub const ADMIN_CLAIM_TEMPLATE: &str = "nvidia-dcgm-admin";

/// Whose host engine is rendered.
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
    /// The GPUCluster's: every GPU of the node through an admin-access DRA claim
    /// ([`ADMIN_CLAIM_TEMPLATE`]), and a Role that reads ResourceClaims, as NVIDIA's.
    GpuCluster,
}

impl Form {
    /// Name of the DaemonSet, its Service, ServiceAccount (and Role), and their `app` label.
    pub fn name(&self) -> &'static str {
        match self {
            Self::ClusterPolicy { .. } => NAME,
            Self::GpuCluster => DRA_NAME,
        }
    }

    /// The reconciler that owns the objects (`app.kubernetes.io/component`).
    pub fn component(&self) -> &'static str {
        match self {
            Self::ClusterPolicy { .. } => Dcgm::NAME,
            Self::GpuCluster => DcgmDra::NAME,
        }
    }

    /// Operand of the `nvidia.com/gpu.deploy.<operand>` gate.
    pub fn deploy_label(&self) -> &'static str {
        match self {
            Self::ClusterPolicy { .. } => operand::DCGM,
            Self::GpuCluster => operand::DCGM_DRA,
        }
    }
}
