//! The DRA driver's objects, one file per kind: identities and permissions (`rbac`), the
//! DeviceClasses, the kubelet plugin DaemonSet, the ComputeDomain controller Deployment, the
//! ResourceSlice admission policy; and the DRA validator's (`validator`).

mod admission;
mod controller;
mod device_classes;
mod kubelet_plugin;
mod rbac;
mod resources;
pub mod validator;

use gpu_operator_core::contract::Children;

pub use admission::NAME as ADMISSION_POLICY;
pub use kubelet_plugin::NAME as KUBELET_PLUGIN_DAEMONSET;

use crate::Input;

/// Everything the DRA driver needs, in apply order.
pub fn children(input: &Input) -> Children {
    let rbac = rbac::build(input);
    Children {
        service_accounts: rbac.service_accounts,
        roles: rbac.roles,
        role_bindings: rbac.role_bindings,
        cluster_roles: rbac.cluster_roles,
        cluster_role_bindings: rbac.cluster_role_bindings,
        admission_policies: vec![admission::policy(&input.namespace)],
        admission_policy_bindings: vec![admission::binding()],
        device_classes: device_classes::build(input),
        daemonsets: vec![kubelet_plugin::build(input)],
        deployments: controller::build(input).into_iter().collect(),
        ..Children::default()
    }
}
