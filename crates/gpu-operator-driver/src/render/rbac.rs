//! The driver's identity and permissions, as NVIDIA grants them. The ClusterRole is what
//! k8s-driver-manager needs to make a node safe for a driver (re)load: read and label the node
//! (pausing operands through their deploy labels, cordoning), find and evict the GPU pods
//! (including those holding GPUs through DRA ResourceClaims), and read its DaemonSet. NVIDIA's
//! OpenShift-only grants (the cluster version, `use` of the `privileged` SecurityContextConstraints)
//! are left out: this operator does not run on OpenShift (the chart refuses `platform.openshift`),
//! and the operator would have to hold them itself to grant them.

use gpu_operator_core::{
    build::rbac::{Identity, rule},
    contract::Operand as _,
};
use k8s_openapi::api::rbac::v1::ClusterRole;

use crate::{Driver, SERVICE_ACCOUNT};

/// ServiceAccount, ClusterRole and binding are all `nvidia-driver`.
pub const IDENTITY: Identity<'static> = Identity {
    name: SERVICE_ACCOUNT,
    component: Driver::NAME,
};

/// ClusterRole `nvidia-driver`.
pub fn cluster_role() -> ClusterRole {
    IDENTITY.cluster_role(vec![
        rule("", &["nodes"], &["get", "list", "patch", "update", "watch"]),
        rule("", &["pods"], &["get", "list", "watch"]),
        rule("", &["pods/eviction"], &["create"]),
        rule("resource.k8s.io", &["resourceclaims"], &["get", "list"]),
        rule("apps", &["daemonsets"], &["get"]),
    ])
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
        assert!(
            rules
                .iter()
                .all(|r| !r.api_groups.as_ref().unwrap()[0].contains("openshift")),
            "no OpenShift-only grant"
        );
    }
}
