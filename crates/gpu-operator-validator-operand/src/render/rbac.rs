//! The validator's permissions, the least it needs: on its own node, read it (capacity, current
//! conditions), patch its conditions (`nodes/status`) and patch the node itself (the startup
//! taint and the summary annotation); in the operator namespace, run and clean up its workload
//! pods (`cuda`, `plugin`), read its own pod (their owner) and record the GPU health agent's
//! Events.

use gpu_operator_core::{
    build::rbac::{Identity, rule},
    contract::Operand as _,
};
use k8s_openapi::api::rbac::v1::{ClusterRole, Role};

use crate::{DAEMONSET, Validation};

/// The validator's ServiceAccount, roles and bindings share the DaemonSet's name.
pub const IDENTITY: Identity<'static> = Identity {
    name: DAEMONSET,
    component: Validation::NAME,
};

/// ClusterRole `nvidia-operator-validator`: nodes get and patch, `nodes/status` patch.
pub fn cluster_role() -> ClusterRole {
    IDENTITY.cluster_role(vec![
        rule("", &["nodes"], &["get", "patch"]),
        rule("", &["nodes/status"], &["patch"]),
    ])
}

/// Role `nvidia-operator-validator`: its workload pods and its own pod; the GPU health agent's
/// Events about its node.
pub fn role() -> Role {
    IDENTITY.role(vec![
        rule("", &["pods"], &["get", "list", "create", "delete"]),
        rule("events.k8s.io", &["events"], &["create"]),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grants(rules: &[k8s_openapi::api::rbac::v1::PolicyRule]) -> Vec<String> {
        rules
            .iter()
            .flat_map(|r| {
                let resources = r.resources.clone().unwrap_or_default();
                resources
                    .into_iter()
                    .flat_map(move |res| r.verbs.iter().map(move |verb| format!("{res}:{verb}")))
            })
            .collect()
    }

    #[test]
    fn the_validator_gets_exactly_what_its_checks_use_and_no_wildcard() {
        assert_eq!(
            grants(&cluster_role().rules.unwrap()),
            ["nodes:get", "nodes:patch", "nodes/status:patch"]
        );
        assert_eq!(
            grants(&role().rules.unwrap()),
            [
                "pods:get",
                "pods:list",
                "pods:create",
                "pods:delete",
                "events:create"
            ]
        );
        let binding = IDENTITY.cluster_role_binding("gpu-operator");
        let subject = &binding.subjects.unwrap()[0];
        assert_eq!(
            (subject.name.as_str(), subject.namespace.as_deref()),
            (DAEMONSET, Some("gpu-operator"))
        );
    }
}
