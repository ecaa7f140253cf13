//! The MIG manager operand: DaemonSet `nvidia-mig-manager` on MIG-capable nodes (node labelling
//! sets `nvidia.com/gpu.deploy.mig-manager=true` only there), the ConfigMaps of its default MIG
//! layouts (`default-mig-parted-config`) and host GPU clients (`default-gpu-clients`) unless the
//! ClusterPolicy names its own, its entrypoint, ServiceAccount and RBAC. It warns when the layout
//! seeded on nodes (`migManager.config.default`) is not in the default layouts, and names the
//! nodes whose layout failed to apply (`watchdog`). Pure validate and render steps; the shared
//! pipeline does the rest.

mod parted;
mod profiles;
mod render;
mod validate;
mod watchdog;

use gpu_operator_api::{ClusterPolicy, ClusterPolicySpec, conditions::operand::MIG_MANAGER_READY};
use gpu_operator_core::{
    Error,
    contract::{Children, Cluster, ImageEnv, Operand, Warning},
};

pub use parted::{ConfigError, layouts};
pub use profiles::{default_config, default_layouts};
pub use validate::Input;

/// Name of the DaemonSet, ServiceAccount, roles and their `app` label, as NVIDIA's.
pub const NAME: &str = "nvidia-mig-manager";
/// The ConfigMap of default MIG layouts (key `config.yaml`).
pub const DEFAULT_CONFIG: &str = "default-mig-parted-config";
/// The operator's checked copy of the user's layouts ConfigMap (`migManager.config.name`), which
/// the manager mounts instead of the user's.
pub const CUSTOM_CONFIG: &str = "nvidia-mig-manager-custom-config";
/// The ConfigMap of host GPU clients (key `clients.yaml`).
pub const DEFAULT_GPU_CLIENTS: &str = "default-gpu-clients";
/// The ConfigMap of the container's entrypoint script.
pub const ENTRYPOINT: &str = "nvidia-mig-manager-entrypoint";

/// The MIG manager operand.
pub struct MigManager;

impl Operand for MigManager {
    type Owner = ClusterPolicy;
    const NAME: &'static str = "mig-manager";
    const CONDITION: &'static str = MIG_MANAGER_READY;
    const SECTION: &'static str = "migManager";
    type Input = Input;
    const IMAGES: &'static [ImageEnv] = &[ImageEnv {
        var: "MIG_MANAGER_IMAGE",
        chart_values: Some("migManager"),
    }];

    fn validate(spec: &ClusterPolicySpec, cluster: &Cluster<'_>) -> Result<Option<Input>, Error> {
        validate::validate(spec, cluster)
    }

    fn render(input: &Input) -> Children {
        render::children(input)
    }

    fn unserved(input: &Input) -> Option<String> {
        watchdog::unserved(&input.failed, &input.stuck)
    }

    fn warnings(input: &Input) -> Vec<Warning> {
        let mut warnings = validate::warnings(input);
        warnings.extend(watchdog::warning(&input.failed));
        warnings.extend(watchdog::stuck_warning(&input.stuck));
        warnings
    }
}
