//! The DCGM exporter's objects, one file per kind.

mod daemonset;
mod dashboards;
pub mod prometheus_rule;
mod rbac;
mod service;
mod service_monitor;

use gpu_operator_core::contract::Children;

use crate::Input;

/// Everything the DCGM exporter needs.
pub fn children(input: &Input) -> Children {
    let (cluster_roles, cluster_role_bindings) = if input.reads_pods() {
        (
            vec![rbac::read_pods()],
            vec![rbac::read_pods_binding(&input.namespace)],
        )
    } else {
        (Vec::new(), Vec::new())
    };
    Children {
        service_accounts: vec![rbac::IDENTITY.service_account()],
        roles: vec![rbac::role()],
        role_bindings: vec![rbac::IDENTITY.role_binding(&input.namespace)],
        cluster_roles,
        cluster_role_bindings,
        config_maps: dashboards::build(input),
        services: vec![service::build(input)],
        daemonsets: vec![daemonset::build(input)],
        service_monitors: service_monitor::build(input).into_iter().collect(),
        prometheus_rules: prometheus_rule::build(input).into_iter().collect(),
        ..Children::default()
    }
}
