//! A sandbox device plugin's objects, one file per kind.

mod daemonset;
mod rbac;

use gpu_operator_core::contract::Children;

use crate::Input;

/// Everything a sandbox device plugin needs: its identity, Role and ClusterRole, and the
/// DaemonSet.
pub fn children(input: &Input) -> Children {
    let identity = rbac::identity(input.flavor);
    Children {
        service_accounts: vec![identity.service_account()],
        roles: vec![identity.role(rbac::role_rules())],
        role_bindings: vec![identity.role_binding(&input.namespace)],
        cluster_roles: vec![identity.cluster_role(rbac::cluster_role_rules())],
        cluster_role_bindings: vec![identity.cluster_role_binding(&input.namespace)],
        daemonsets: vec![daemonset::build(input)],
        ..Children::default()
    }
}
