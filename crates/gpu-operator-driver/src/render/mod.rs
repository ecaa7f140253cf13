//! The driver's objects, one file per kind (containers and mounts split out of the DaemonSet).

mod config_map;
mod config_mounts;
mod containers;
mod daemonset;
mod parts;
mod rbac;
mod sidecars;

use gpu_operator_core::contract::Children;

pub use config_mounts::{cert_config_dir, repo_config_dir};

use crate::Input;

/// Everything the driver needs: identity and permissions, the startup probe script, and one
/// DaemonSet per pool.
pub fn children(input: &Input) -> Children {
    Children {
        service_accounts: vec![rbac::IDENTITY.service_account()],
        cluster_roles: vec![rbac::cluster_role()],
        cluster_role_bindings: vec![rbac::IDENTITY.cluster_role_binding(&input.namespace)],
        config_maps: vec![config_map::startup_probe()],
        daemonsets: input
            .pools
            .iter()
            .map(|pool| daemonset::build(input, pool))
            .collect(),
        ..Children::default()
    }
}
