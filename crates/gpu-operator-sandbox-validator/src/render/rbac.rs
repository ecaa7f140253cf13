//! The sandbox validator's identity and permissions. NVIDIA grants it `get` on nodes (its checks
//! read the node's labels: workload config, CC mode); ours also writes each check's Node
//! condition (`GPUVfioPciReady`, `GPUVgpuManagerReady`, `GPUVgpuDevicesReady`,
//! `GPUCcManagerReady`) and the validation summary annotation, as the container-stack validator
//! does, hence `patch` on `nodes/status` and on nodes. NVIDIA's OpenShift-only grant (`use` of the
//! `privileged` SecurityContextConstraints, hence its Role and RoleBinding) is left out: this
//! operator does not run on OpenShift.

use gpu_operator_core::{
    build::rbac::{Identity, rule},
    contract::Operand as _,
};
use k8s_openapi::api::rbac::v1::ClusterRole;

use crate::{NAME, SandboxValidator};

/// ServiceAccount, ClusterRole and binding are all `nvidia-sandbox-validator`.
pub const IDENTITY: Identity<'static> = Identity {
    name: NAME,
    component: SandboxValidator::NAME,
};

/// ClusterRole `nvidia-sandbox-validator`: nodes get and patch, `nodes/status` patch.
pub fn cluster_role() -> ClusterRole {
    IDENTITY.cluster_role(vec![
        rule("", &["nodes"], &["get", "patch"]),
        rule("", &["nodes/status"], &["patch"]),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_only_and_no_wildcard() {
        let grants: Vec<String> = cluster_role()
            .rules
            .unwrap_or_default()
            .iter()
            .flat_map(|r| {
                let resources = r.resources.clone().unwrap_or_default();
                resources
                    .into_iter()
                    .flat_map(move |res| r.verbs.iter().map(move |verb| format!("{res}:{verb}")))
            })
            .collect();
        assert_eq!(grants, ["nodes:get", "nodes:patch", "nodes/status:patch"]);
        let binding = IDENTITY.cluster_role_binding("gpu-operator");
        let subject = &binding.subjects.unwrap()[0];
        assert_eq!(
            (subject.name.as_str(), subject.namespace.as_deref()),
            (NAME, Some("gpu-operator"))
        );
    }
}
