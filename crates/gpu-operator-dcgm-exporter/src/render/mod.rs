//! The DCGM exporter's objects, one file per kind.

mod daemonset;
mod dashboards;
pub mod prometheus_rule;
mod rbac;
mod service;
mod service_monitor;

use gpu_operator_core::{build::admin_claim, contract::Children};

use crate::{ADMIN_CLAIM_TEMPLATE, Input};

/// Everything the DCGM exporter needs.
pub fn children(input: &Input) -> Children {
    let form = &input.form;
    let (cluster_roles, cluster_role_bindings) = if input.reads_pods() {
        (
            vec![rbac::read_pods(form)],
            vec![rbac::read_pods_binding(form, &input.namespace)],
        )
    } else {
        (Vec::new(), Vec::new())
    };
    let identity = rbac::identity(form);
    let resource_claim_templates = if form.is_dra() {
        vec![admin_claim::template(
            ADMIN_CLAIM_TEMPLATE,
            identity.name,
            identity.component,
        )]
    } else {
        Vec::new()
    };
    Children {
        service_accounts: vec![identity.service_account()],
        roles: vec![rbac::role(form)],
        role_bindings: vec![identity.role_binding(&input.namespace)],
        cluster_roles,
        cluster_role_bindings,
        config_maps: dashboards::build(input),
        services: vec![service::build(input)],
        daemonsets: vec![daemonset::build(input)],
        service_monitors: service_monitor::build(input).into_iter().collect(),
        prometheus_rules: prometheus_rule::build(input).into_iter().collect(),
        resource_claim_templates,
        ..Children::default()
    }
}
