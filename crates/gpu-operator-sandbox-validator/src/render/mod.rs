//! The sandbox validator's objects, one file per kind.

mod daemonset;
mod rbac;

use gpu_operator_core::contract::Children;

use crate::Input;

/// Everything the sandbox validator needs: its identity and ClusterRole, and the DaemonSet.
pub fn children(input: &Input) -> Children {
    Children {
        service_accounts: vec![rbac::IDENTITY.service_account()],
        cluster_roles: vec![rbac::cluster_role()],
        cluster_role_bindings: vec![rbac::IDENTITY.cluster_role_binding(&input.namespace)],
        daemonsets: vec![daemonset::build(input)],
        ..Children::default()
    }
}
