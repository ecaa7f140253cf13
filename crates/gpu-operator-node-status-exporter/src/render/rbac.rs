//! The node status exporter's identity and permissions, as NVIDIA grants them: read nodes; in the
//! operator namespace read pods and DaemonSets. (NVIDIA's Role also lets it use OpenShift SCCs,
//! which do not apply here.)

use gpu_operator_core::{
    build::rbac::{Identity, rule},
    contract::Operand as _,
};
use k8s_openapi::api::rbac::v1::{ClusterRole, Role};

use crate::{NAME, NodeStatusExporter};

/// The ServiceAccount, roles and bindings share the DaemonSet's name.
pub const IDENTITY: Identity<'static> = Identity {
    name: NAME,
    component: NodeStatusExporter::NAME,
};

/// ClusterRole `nvidia-node-status-exporter`: nodes get, list, watch.
pub fn cluster_role() -> ClusterRole {
    IDENTITY.cluster_role(vec![rule("", &["nodes"], &["get", "list", "watch"])])
}

/// Role `nvidia-node-status-exporter`: pods get, list; DaemonSets get, list, watch.
pub fn role() -> Role {
    IDENTITY.role(vec![
        rule("", &["pods"], &["get", "list"]),
        rule("apps", &["daemonsets"], &["get", "list", "watch"]),
    ])
}
