//! The driver's identity and permissions, as NVIDIA grants them. The ClusterRole is what
//! k8s-driver-manager needs to make a node safe for a driver (re)load: read and label the node
//! (pausing operands through their deploy labels, cordoning), find and evict the GPU pods
//! (including those holding GPUs through DRA ResourceClaims), and read its DaemonSet; plus the
//! OpenShift version for the driver container. The Role lets the pods use OpenShift's
//! `privileged` SecurityContextConstraints (inert elsewhere).

use gpu_operator_core::{
    operand::Operand as _,
    rbac::{Identity, rule},
};
use k8s_openapi::api::rbac::v1::{ClusterRole, Role};

use crate::{Driver, SERVICE_ACCOUNT};

/// ServiceAccount, Role, ClusterRole and bindings are all `nvidia-driver`.
pub const IDENTITY: Identity<'static> = Identity {
    name: SERVICE_ACCOUNT,
    component: Driver::NAME,
};

/// ClusterRole `nvidia-driver`.
pub fn cluster_role() -> ClusterRole {
    IDENTITY.cluster_role(vec![
        rule(
            "config.openshift.io",
            &["clusterversions"],
            &["get", "list"],
        ),
        rule("", &["nodes"], &["get", "list", "patch", "update", "watch"]),
        rule("", &["pods"], &["get", "list", "watch"]),
        rule("", &["pods/eviction"], &["create"]),
        rule("resource.k8s.io", &["resourceclaims"], &["get", "list"]),
        rule("apps", &["daemonsets"], &["get"]),
    ])
}

/// Role `nvidia-driver`: `use` of the `privileged` SecurityContextConstraints.
pub fn role() -> Role {
    let mut scc = rule(
        "security.openshift.io",
        &["securitycontextconstraints"],
        &["use"],
    );
    scc.resource_names = Some(vec!["privileged".to_owned()]);
    IDENTITY.role(vec![scc])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_driver_manager_can_evict_gpu_pods_and_label_its_node() {
        let rules = cluster_role().rules.unwrap();
        let grants = |resource: &str| -> Vec<String> {
            rules
                .iter()
                .filter(|r| r.resources.as_ref().unwrap().iter().any(|x| x == resource))
                .flat_map(|r| r.verbs.clone())
                .collect()
        };
        assert_eq!(grants("pods/eviction"), ["create"]);
        assert!(grants("nodes").contains(&"patch".to_owned()));
        assert_eq!(grants("daemonsets"), ["get"]);
        let role = role().rules.unwrap();
        assert_eq!(
            role[0].resource_names.as_deref(),
            Some(&["privileged".to_owned()][..])
        );
    }
}
