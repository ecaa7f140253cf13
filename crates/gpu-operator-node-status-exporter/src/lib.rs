//! The node status exporter operand (off by default, as NVIDIA's): DaemonSet
//! `nvidia-node-status-exporter` on nodes labelled
//! `nvidia.com/gpu.deploy.node-status-exporter=true`, publishing each node's validation results
//! on port 8000 (`node-status`), its Service, a ServiceMonitor while the ServiceMonitor CRD is
//! installed, its ServiceAccount and RBAC. Pure validate and render steps.

mod render;
mod validate;

use gpu_operator_api::{
    ClusterPolicy, ClusterPolicySpec, conditions::operand::NODE_STATUS_EXPORTER_READY,
};
use gpu_operator_core::{
    Error,
    contract::{Children, Cluster, Operand},
};

pub use validate::Input;

/// Name of the DaemonSet, Service, ServiceMonitor, ServiceAccount, roles and `app` label.
pub const NAME: &str = "nvidia-node-status-exporter";
/// The metrics port and its name.
pub const PORT: (&str, i32) = ("node-status", 8000);

/// The node status exporter operand.
pub struct NodeStatusExporter;

impl Operand for NodeStatusExporter {
    type Owner = ClusterPolicy;
    const NAME: &'static str = "node-status-exporter";
    const CONDITION: &'static str = NODE_STATUS_EXPORTER_READY;
    const SECTION: &'static str = "nodeStatusExporter";
    const SERVICE_MONITORS: bool = true;
    type Input = Input;

    fn validate(spec: &ClusterPolicySpec, cluster: &Cluster<'_>) -> Result<Option<Input>, Error> {
        validate::validate(spec, cluster)
    }

    fn render(input: &Input) -> Children {
        render::children(input)
    }
}
