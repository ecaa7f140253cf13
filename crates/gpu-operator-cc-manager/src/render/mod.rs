//! The CC manager's objects, one file per kind.

mod daemonset;
mod rbac;

use gpu_operator_core::contract::Children;

use crate::Input;

/// Everything the CC manager needs: its identity, Role, ClusterRole and bindings, and the
/// DaemonSet.
pub fn children(input: &Input) -> Children {
    Children {
        service_accounts: vec![rbac::IDENTITY.service_account()],
        roles: vec![rbac::role()],
        role_bindings: vec![rbac::IDENTITY.role_binding(&input.namespace)],
        cluster_roles: vec![rbac::cluster_role()],
        cluster_role_bindings: vec![rbac::IDENTITY.cluster_role_binding(&input.namespace)],
        daemonsets: vec![daemonset::build(input)],
        ..Children::default()
    }
}
