//! DCGM's objects, one file per kind.

mod daemonset;
mod service;

use gpu_operator_core::{
    build::{
        admin_claim,
        rbac::{Identity, rule},
    },
    contract::Children,
};

use crate::{ADMIN_CLAIM_TEMPLATE, Form, Input};

/// The ServiceAccount shares the DaemonSet's name. (NVIDIA's ClusterPolicy Role only lets it use
/// OpenShift's privileged SCC, which does not apply here.)
fn identity(form: &Form) -> Identity<'static> {
    Identity {
        name: form.name(),
        component: form.component(),
    }
}

/// Everything DCGM needs; the GPUCluster's also its admin-access claim template and, as NVIDIA's,
/// a Role that reads the ResourceClaims of the operator namespace.
pub fn children(input: &Input) -> Children {
    let identity = identity(&input.form);
    let mut children = Children {
        service_accounts: vec![identity.service_account()],
        services: vec![service::build(&input.form)],
        daemonsets: vec![daemonset::build(input)],
        ..Children::default()
    };
    if input.form == Form::GpuCluster {
        children.roles = vec![identity.role(vec![rule(
            "resource.k8s.io",
            &["resourceclaims"],
            &["get", "list", "watch"],
        )])];
        children.role_bindings = vec![identity.role_binding(&input.namespace)];
        children.resource_claim_templates = vec![admin_claim::template(
            ADMIN_CLAIM_TEMPLATE,
            identity.name,
            identity.component,
        )];
    }
    children
}
