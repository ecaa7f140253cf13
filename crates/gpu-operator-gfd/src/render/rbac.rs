//! GFD's permissions, as NVIDIA's: read Nodes (the config manager follows its node's label);
//! in the operator namespace, publish its labels as NFD `NodeFeature` objects and read its own
//! pod (their owner). NVIDIA's OpenShift SCC `use` rule is not rendered.

use gpu_operator_core::{
    build::rbac::{Identity, rule},
    contract::Operand as _,
};
use k8s_openapi::api::rbac::v1::{ClusterRole, Role};

use crate::{GpuFeatureDiscovery, SERVICE_ACCOUNT};

/// GFD's ServiceAccount, roles and bindings share one name.
pub const IDENTITY: Identity<'static> = Identity {
    name: SERVICE_ACCOUNT,
    component: GpuFeatureDiscovery::NAME,
};

/// ClusterRole `nvidia-gpu-feature-discovery`: nodes get, list, watch.
pub fn cluster_role() -> ClusterRole {
    IDENTITY.cluster_role(vec![rule("", &["nodes"], &["get", "list", "watch"])])
}

/// Role `nvidia-gpu-feature-discovery`: NodeFeatures and its own pod.
pub fn role() -> Role {
    IDENTITY.role(vec![
        rule(
            "nfd.k8s-sigs.io",
            &["nodefeatures"],
            &["get", "list", "watch", "create", "update"],
        ),
        rule("", &["pods"], &["get"]),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gfd_publishes_node_features_and_reads_nodes_and_its_pod() {
        let namespaced = role().rules.unwrap();
        assert_eq!(
            namespaced[0].api_groups.as_deref(),
            Some(&["nfd.k8s-sigs.io".to_owned()][..])
        );
        assert_eq!(
            namespaced[0].verbs,
            ["get", "list", "watch", "create", "update"]
        );
        assert_eq!(namespaced[1].verbs, ["get"]);
        assert_eq!(
            cluster_role().rules.unwrap()[0].verbs,
            ["get", "list", "watch"]
        );
    }
}
