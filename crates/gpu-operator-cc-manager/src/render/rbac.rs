//! The CC manager's identity and permissions, as NVIDIA grants them: it reads and labels its node
//! (its `nvidia.com/cc.mode` label, the mode state labels, the sandbox operands' deploy labels it
//! pauses during a mode change) and, in the operator namespace, watches the pods of the operands
//! it paused until they are gone. Patching nodes cannot be narrowed by RBAC: the chart's
//! node-agent policy confines the ServiceAccount to its own node and those labels. NVIDIA's
//! OpenShift-only grant (`use` of the `privileged` SecurityContextConstraints) is left out, as
//! for the other operands.

use gpu_operator_core::{
    build::rbac::{Identity, rule},
    contract::Operand as _,
};
use k8s_openapi::api::rbac::v1::{ClusterRole, Role};

use crate::{CcManager, NAME};

/// ServiceAccount, Role, ClusterRole and bindings are all `nvidia-cc-manager`.
pub const IDENTITY: Identity<'static> = Identity {
    name: NAME,
    component: CcManager::NAME,
};

/// ClusterRole `nvidia-cc-manager`: nodes get, list, patch, watch.
pub fn cluster_role() -> ClusterRole {
    IDENTITY.cluster_role(vec![rule(
        "",
        &["nodes"],
        &["get", "list", "patch", "watch"],
    )])
}

/// Role `nvidia-cc-manager`: pods get, list, watch.
pub fn role() -> Role {
    IDENTITY.role(vec![rule("", &["pods"], &["get", "list", "watch"])])
}
