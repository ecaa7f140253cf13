//! The container toolkit operand: `nvidia-container-toolkit-daemonset`, which installs the NVIDIA
//! container runtime on each GPU node and configures the node's container runtime (containerd,
//! CRI-O or Docker) for it, with its ServiceAccount, Role and entrypoint ConfigMap; and the
//! RuntimeClasses `nvidia` (named by `operator.runtimeClass`), `nvidia-cdi` and `nvidia-legacy`,
//! which stay while the toolkit is disabled (a host-installed toolkit needs them too). Pure
//! validate and render steps; the shared pipeline does the rest.

mod render;
mod runtime;
mod validate;

use gpu_operator_api::{ClusterPolicy, ClusterPolicySpec, conditions::operand::TOOLKIT_READY};
use gpu_operator_core::{
    Error,
    contract::{Children, Cluster, ImageEnv, Operand},
};

pub use validate::Input;

/// Name of the DaemonSet and its `app` label, as NVIDIA names them.
pub const DAEMONSET: &str = "nvidia-container-toolkit-daemonset";
/// Name of the ServiceAccount, Role and RoleBinding, as NVIDIA names them.
pub const SERVICE_ACCOUNT: &str = "nvidia-container-toolkit";
/// Name of the ConfigMap with the toolkit container's entrypoint.
pub const ENTRYPOINT_CONFIG_MAP: &str = "nvidia-container-toolkit-entrypoint";

/// The container toolkit operand.
pub struct Toolkit;

impl Operand for Toolkit {
    type Owner = ClusterPolicy;
    const NAME: &'static str = "container-toolkit";
    const CONDITION: &'static str = TOOLKIT_READY;
    const SECTION: &'static str = "toolkit";
    type Input = Input;
    const IMAGES: &'static [ImageEnv] = &[ImageEnv {
        var: "CONTAINER_TOOLKIT_IMAGE",
        chart_values: Some("toolkit"),
    }];

    fn validate(spec: &ClusterPolicySpec, cluster: &Cluster<'_>) -> Result<Option<Input>, Error> {
        validate::validate(spec, cluster)
    }

    fn render(input: &Input) -> Children {
        render::children(input)
    }

    fn render_disabled(spec: &ClusterPolicySpec, _cluster: &Cluster<'_>) -> Children {
        Children {
            runtime_classes: render::runtime_classes(&render::RuntimeSettings::of(spec)),
            ..Children::default()
        }
    }
}
