//! The vGPU manager's objects, one file per kind.

mod daemonset;
mod rbac;

use gpu_operator_core::contract::Children;

use crate::Input;

/// Everything the vGPU manager needs: its identity and ClusterRole, and the DaemonSet (none while
/// no OS of the GPU nodes is known).
pub fn children(input: &Input) -> Children {
    Children {
        service_accounts: vec![rbac::IDENTITY.service_account()],
        cluster_roles: vec![rbac::cluster_role()],
        cluster_role_bindings: vec![rbac::IDENTITY.cluster_role_binding(&input.namespace)],
        daemonsets: input
            .os
            .iter()
            .map(|os| daemonset::build(input, os))
            .collect(),
        ..Children::default()
    }
}
