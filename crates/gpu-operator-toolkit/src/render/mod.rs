//! The toolkit's objects, one file per kind.

mod config_map;
mod daemonset;
mod rbac;
mod runtime_classes;

use gpu_operator_core::contract::Children;

pub use runtime_classes::{RuntimeSettings, runtime_classes};

use crate::Input;

/// Everything the toolkit needs.
pub fn children(input: &Input) -> Children {
    Children {
        service_accounts: vec![rbac::IDENTITY.service_account()],
        roles: vec![rbac::role()],
        role_bindings: vec![rbac::IDENTITY.role_binding(&input.namespace)],
        config_maps: vec![config_map::entrypoint()],
        runtime_classes: runtime_classes(&input.runtime_settings),
        daemonsets: vec![daemonset::build(input)],
        ..Children::default()
    }
}
