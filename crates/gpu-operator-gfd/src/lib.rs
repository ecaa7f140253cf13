//! The GPU Feature Discovery operand, NVIDIA's `gpu-feature-discovery` state: the
//! `gpu-feature-discovery` DaemonSet on nodes labelled
//! `nvidia.com/gpu.deploy.gpu-feature-discovery=true`, its ServiceAccount and RBAC. GFD labels
//! nodes through Node Feature Discovery (NodeFeature objects or NFD's local feature files).
//! Pure validate and render steps.

mod render;
mod validate;

use gpu_operator_api::{ClusterPolicy, ClusterPolicySpec, conditions::operand::GFD_READY};
use gpu_operator_core::{
    Error,
    contract::{Children, Cluster, ImageEnv, Operand},
};

pub use validate::Input;

/// Name of the DaemonSet and its `app` label, as NVIDIA names them.
pub const DAEMONSET: &str = "gpu-feature-discovery";
/// The operator's checked copy of the ConfigMap `devicePlugin.config.name` names, which GFD's
/// config manager mounts.
pub const CONFIGS: &str = "gpu-feature-discovery-configs";
/// Name of the ServiceAccount and RBAC, as NVIDIA names them.
pub const SERVICE_ACCOUNT: &str = "nvidia-gpu-feature-discovery";

/// The GPU Feature Discovery operand.
pub struct GpuFeatureDiscovery;

impl Operand for GpuFeatureDiscovery {
    type Owner = ClusterPolicy;
    const NAME: &'static str = "gpu-feature-discovery";
    const CONDITION: &'static str = GFD_READY;
    const SECTION: &'static str = "gfd";
    type Input = Input;
    const IMAGES: &'static [ImageEnv] = &[ImageEnv {
        var: "GFD_IMAGE",
        chart_values: Some("gfd"),
    }];

    fn validate(spec: &ClusterPolicySpec, cluster: &Cluster<'_>) -> Result<Option<Input>, Error> {
        validate::validate(spec, cluster)
    }

    fn render(input: &Input) -> Children {
        render::children(input)
    }
}
