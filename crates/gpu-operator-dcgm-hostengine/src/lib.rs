//! The DCGM operand: the standalone host engine `nv-hostengine` as DaemonSet `nvidia-dcgm` on
//! nodes labelled `nvidia.com/gpu.deploy.dcgm=true`, and Service `nvidia-dcgm` (port 5555, node
//! local) through which the DCGM exporter reaches the engine on its own node; and the same for a
//! GPUCluster ([`DcgmDra`], in `gpu_cluster`): `nvidia-dcgm-dra`, the GPUs through an
//! admin-access DRA claim. Pure validate and render steps; the shared pipeline in
//! `gpu_operator_core::pipeline::operand` does the rest.

mod form;
mod gpu_cluster;
mod render;
mod validate;

use gpu_operator_api::{ClusterPolicy, ClusterPolicySpec, conditions::operand::DCGM_READY};
use gpu_operator_core::{
    Error,
    contract::{Children, Cluster, ImageEnv, Operand},
};

pub use form::{ADMIN_CLAIM_TEMPLATE, Form};
pub use gpu_cluster::DcgmDra;
pub use validate::Input;

/// Name of the DaemonSet, its Service and ServiceAccount, and their `app` label, as NVIDIA's.
pub const NAME: &str = "nvidia-dcgm";
/// The same names of the GPUCluster's host engine, as NVIDIA's.
pub const DRA_NAME: &str = "nvidia-dcgm-dra";
/// Port of the host engine.
pub const PORT: i32 = 5555;

/// The DCGM operand.
pub struct Dcgm;

impl Operand for Dcgm {
    type Owner = ClusterPolicy;
    const NAME: &'static str = "dcgm";
    const CONDITION: &'static str = DCGM_READY;
    const SECTION: &'static str = "dcgm";
    type Input = Input;
    const IMAGES: &'static [ImageEnv] = &[ImageEnv {
        var: "DCGM_IMAGE",
        chart_values: Some("dcgm"),
    }];

    fn validate(spec: &ClusterPolicySpec, cluster: &Cluster<'_>) -> Result<Option<Input>, Error> {
        validate::validate(spec, cluster)
    }

    fn render(input: &Input) -> Children {
        render::children(input)
    }
}
