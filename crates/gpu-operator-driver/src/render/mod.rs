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
pub(crate) use containers::DRIVER_CONTAINER;

use crate::Input;

/// Everything the driver needs: identity and permissions, the startup probe script, and one
/// DaemonSet per pool; with what an NVIDIADriver changes in them (`crate::nvidia_driver`).
pub fn children(input: &Input) -> Children {
    let mut daemonsets: Vec<_> = input
        .pools
        .iter()
        .map(|pool| daemonset::build(input, pool))
        .collect();
    if let Some(per) = &input.nvidia_driver {
        // The rest is the ClusterPolicy's to render for every NVIDIADriver ([`shared`]).
        crate::nvidia_driver::apply(&mut daemonsets, per);
        return Children {
            daemonsets,
            ..Children::default()
        };
    }
    Children {
        daemonsets,
        ..shared(&input.namespace)
    }
}

/// The driver's ServiceAccount, RBAC (bound in `namespace`) and startup probe ConfigMap.
pub fn shared(namespace: &str) -> Children {
    Children {
        service_accounts: vec![rbac::IDENTITY.service_account()],
        cluster_roles: vec![rbac::cluster_role()],
        cluster_role_bindings: vec![rbac::IDENTITY.cluster_role_binding(namespace)],
        config_maps: vec![config_map::startup_probe()],
        ..Children::default()
    }
}
