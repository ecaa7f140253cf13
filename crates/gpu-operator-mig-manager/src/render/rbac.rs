//! The MIG manager's identity and permissions, as NVIDIA grants them: on nodes, read them and
//! rewrite their labels (`nvidia.com/mig.config.state`, the paused `gpu.deploy.*` labels); list
//! pods cluster-wide (GPU clients on its node); in the operator namespace, watch and delete pods
//! (the operands it restarts) and write ConfigMaps (the per-node generated layouts). (NVIDIA's
//! Role also lets it use OpenShift's privileged SCC, which does not apply here.)

use gpu_operator_core::{
    build::rbac::{Identity, rule},
    contract::Operand as _,
};
use k8s_openapi::api::rbac::v1::{ClusterRole, Role};

use crate::{MigManager, NAME};

/// The ServiceAccount, roles and bindings share the DaemonSet's name.
pub const IDENTITY: Identity<'static> = Identity {
    name: NAME,
    component: MigManager::NAME,
};

/// ClusterRole `nvidia-mig-manager`.
pub fn cluster_role() -> ClusterRole {
    IDENTITY.cluster_role(vec![
        rule("", &["nodes"], &["get", "list", "watch", "update", "patch"]),
        rule("", &["pods"], &["list"]),
    ])
}

/// Role `nvidia-mig-manager`.
pub fn role() -> Role {
    IDENTITY.role(vec![
        rule("", &["pods"], &["get", "list", "watch", "delete"]),
        rule(
            "",
            &["configmaps"],
            &["create", "get", "list", "update", "patch"],
        ),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mig_manager_may_relabel_nodes_and_restart_operand_pods() {
        let cluster = cluster_role().rules.unwrap();
        assert!(cluster[0].verbs.contains(&"patch".to_owned()));
        let role = role().rules.unwrap();
        assert!(role[0].verbs.contains(&"delete".to_owned()));
    }
}
