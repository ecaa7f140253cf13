//! GPU Feature Discovery's objects, one file per kind.

mod daemonset;
mod rbac;

use gpu_operator_core::contract::Children;
use gpu_operator_plugin_config::config_manager;

use crate::Input;

/// Everything GFD needs.
pub fn children(input: &Input) -> Children {
    let mut gfd = daemonset::build(input);
    if let Some(configs) = &input.configs {
        config_manager::annotate(&mut gfd, configs);
    }
    Children {
        service_accounts: vec![rbac::IDENTITY.service_account()],
        roles: vec![rbac::role()],
        role_bindings: vec![rbac::IDENTITY.role_binding(&input.namespace)],
        cluster_roles: vec![rbac::cluster_role()],
        cluster_role_bindings: vec![rbac::IDENTITY.cluster_role_binding(&input.namespace)],
        config_maps: input.configs.iter().map(|c| c.config_map.clone()).collect(),
        daemonsets: vec![gfd],
        ..Children::default()
    }
}
