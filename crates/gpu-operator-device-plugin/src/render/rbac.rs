//! The ServiceAccounts and RBAC of the device plugin and the MPS control daemon, as NVIDIA's:
//! each may read Nodes (the config manager follows its node's `nvidia.com/device-plugin.config`
//! label). NVIDIA's namespaced Roles only grant OpenShift's SCC `use`, which we do not deploy.

use gpu_operator_core::{
    build::rbac::{Identity, rule},
    contract::Operand as _,
};
use k8s_openapi::api::{
    core::v1::ServiceAccount,
    rbac::v1::{ClusterRole, ClusterRoleBinding},
};

use crate::{DevicePlugin, MPS_DAEMONSET, SERVICE_ACCOUNT};

const IDENTITIES: [Identity<'static>; 2] = [
    Identity {
        name: SERVICE_ACCOUNT,
        component: DevicePlugin::NAME,
    },
    Identity {
        name: MPS_DAEMONSET,
        component: DevicePlugin::NAME,
    },
];

/// `nvidia-device-plugin` and `nvidia-device-plugin-mps-control-daemon`.
pub fn service_accounts() -> Vec<ServiceAccount> {
    IDENTITIES.iter().map(Identity::service_account).collect()
}

/// Each may get, list and watch Nodes.
pub fn cluster_roles() -> Vec<ClusterRole> {
    IDENTITIES
        .iter()
        .map(|id| id.cluster_role(vec![rule("", &["nodes"], &["get", "list", "watch"])]))
        .collect()
}

/// Each ClusterRole bound to its ServiceAccount in `namespace`.
pub fn cluster_role_bindings(namespace: &str) -> Vec<ClusterRoleBinding> {
    IDENTITIES
        .iter()
        .map(|id| id.cluster_role_binding(namespace))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_identities_only_read_nodes() {
        let all = cluster_roles();
        assert_eq!(all.len(), 2);
        for role in all {
            let granted = role.rules.unwrap();
            assert_eq!(granted.len(), 1);
            assert_eq!(
                granted[0].resources.as_deref(),
                Some(&["nodes".to_owned()][..])
            );
            assert_eq!(granted[0].verbs, ["get", "list", "watch"]);
        }
        let bindings = cluster_role_bindings("gpu-operator");
        assert_eq!(
            bindings[0].subjects.as_ref().unwrap()[0].name,
            SERVICE_ACCOUNT
        );
    }
}
