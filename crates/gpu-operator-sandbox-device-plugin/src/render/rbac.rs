//! A sandbox device plugin's identity and permissions, as NVIDIA grants them (the same to both
//! plugins): read nodes and pods cluster-wide; in the operator namespace, manage pods and NFD
//! `NodeFeature` objects. NVIDIA's OpenShift-only grants (the cluster version, `use` of the
//! `privileged` SecurityContextConstraints) are left out, as for the other operands: this
//! operator does not run on OpenShift, and it would have to hold them itself to grant them.

use gpu_operator_core::build::rbac::{Identity, rule};
use k8s_openapi::api::rbac::v1::PolicyRule;

use crate::Flavor;

/// ServiceAccount, Role, ClusterRole and bindings all carry the flavor's account name.
pub const fn identity(flavor: &Flavor) -> Identity<'static> {
    Identity {
        name: flavor.account,
        component: flavor.component,
    }
}

/// The ClusterRole's rules: nodes and pods get.
pub fn cluster_role_rules() -> Vec<PolicyRule> {
    vec![rule("", &["nodes", "pods"], &["get"])]
}

/// The Role's rules: pods create, get, list, watch, delete; NodeFeatures create, get, list,
/// watch, update.
pub fn role_rules() -> Vec<PolicyRule> {
    vec![
        rule("", &["pods"], &["create", "get", "list", "watch", "delete"]),
        rule(
            "nfd.k8s-sigs.io",
            &["nodefeatures"],
            &["create", "get", "list", "watch", "update"],
        ),
    ]
}
