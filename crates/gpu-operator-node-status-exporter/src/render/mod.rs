//! The node status exporter's objects, one file per kind.

mod daemonset;
mod rbac;
mod service;

use gpu_operator_core::{
    build::service_monitor,
    contract::{Children, Operand as _},
};
use serde_json::json;

use crate::{Input, NAME, NodeStatusExporter, PORT};

/// Everything the node status exporter needs.
pub fn children(input: &Input) -> Children {
    let monitor = input.service_monitor.then(|| {
        let spec = json!({
            "endpoints": [{"port": PORT.0, "path": "/metrics"}],
            "jobLabel": PORT.0,
            "namespaceSelector": {"matchNames": [input.namespace]},
            "selector": {"matchLabels": {"app": NAME}},
        });
        service_monitor::build(
            NAME,
            NAME,
            NodeStatusExporter::NAME,
            &std::collections::BTreeMap::new(),
            spec,
        )
    });
    Children {
        service_accounts: vec![rbac::IDENTITY.service_account()],
        roles: vec![rbac::role()],
        role_bindings: vec![rbac::IDENTITY.role_binding(&input.namespace)],
        cluster_roles: vec![rbac::cluster_role()],
        cluster_role_bindings: vec![rbac::IDENTITY.cluster_role_binding(&input.namespace)],
        services: vec![service::build()],
        daemonsets: vec![daemonset::build(input)],
        service_monitors: monitor.into_iter().collect(),
        ..Children::default()
    }
}
