//! The DRA driver's identities and permissions, as NVIDIA grants them. The kubelet plugin
//! (`nvidia-dra-driver-kubeletplugin`): publishes its node's ResourceSlices (the admission policy
//! of [`super::admission`] keeps it to its own node), reads the claims it prepares, labels its
//! node; in the operator namespace, lists DaemonSets (its driver-validation init container),
//! with `MPSSupport` manages MPS control daemon Deployments, and with `computeDomains` reads
//! ComputeDomain cliques. The ComputeDomain controller (`nvidia-dra-driver-controller`) and the
//! ComputeDomain daemons (`compute-domain-daemon-service-account`, ClusterRole
//! `compute-domain-daemon`) exist only with `computeDomains`. One difference from NVIDIA: the
//! controller's leader-election Lease is granted in the operator namespace only (where
//! `LEADER_ELECTION_LEASE_LOCK_NAMESPACE` points) and by its name, not every Lease cluster-wide.

use std::collections::BTreeMap;

use gpu_operator_core::{
    build::{meta, rbac::rule},
    contract::Operand as _,
};
use k8s_openapi::{
    api::{
        core::v1::ServiceAccount,
        rbac::v1::{
            ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
        },
    },
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};

use crate::{DraDriver, Input};

/// The kubelet plugin's ServiceAccount, ClusterRole, Role and their bindings.
pub const KUBELET_PLUGIN: &str = "nvidia-dra-driver-kubeletplugin";
/// The kubelet plugin's Role for MPS control daemon Deployments (`MPSSupport`).
pub const KUBELET_PLUGIN_MPS: &str = "nvidia-dra-driver-kubeletplugin-mps";
/// The kubelet plugin's Role for its driver-validation init container.
pub const KUBELET_PLUGIN_VALIDATION: &str = "nvidia-dra-driver-kubeletplugin-driver-validation";
/// The ComputeDomain controller's ServiceAccount, ClusterRole, Role and bindings.
pub const CONTROLLER: &str = "nvidia-dra-driver-controller";
/// The ComputeDomain daemons' ServiceAccount (the controller's DaemonSets run under it).
pub const DAEMON_ACCOUNT: &str = "compute-domain-daemon-service-account";
/// The ComputeDomain daemons' ClusterRole and binding.
pub const DAEMON: &str = "compute-domain-daemon";

const READ: [&str; 3] = ["get", "list", "watch"];
const MANAGE: [&str; 7] = [
    "get", "list", "watch", "create", "update", "patch", "delete",
];
const CD_GROUP: &str = "resource.nvidia.com";

/// The identities and permissions `input` needs.
#[derive(Debug, Default)]
pub struct Rbac {
    /// ServiceAccounts.
    pub service_accounts: Vec<ServiceAccount>,
    /// Roles (operator namespace).
    pub roles: Vec<Role>,
    /// Their bindings.
    pub role_bindings: Vec<RoleBinding>,
    /// ClusterRoles.
    pub cluster_roles: Vec<ClusterRole>,
    /// Their bindings.
    pub cluster_role_bindings: Vec<ClusterRoleBinding>,
}

/// Everything of this module for `input`.
pub fn build(input: &Input) -> Rbac {
    let ns = input.namespace.as_str();
    let mut rbac = Rbac::default();
    rbac.account(KUBELET_PLUGIN);
    rbac.cluster_role(KUBELET_PLUGIN, KUBELET_PLUGIN, ns, kubelet_plugin_rules());
    if input.compute_domains.is_some() {
        rbac.role(
            KUBELET_PLUGIN,
            KUBELET_PLUGIN,
            ns,
            vec![rule(CD_GROUP, &["computedomaincliques"], &["get"])],
        );
    }
    if input.gate("MPSSupport") {
        rbac.role(
            KUBELET_PLUGIN_MPS,
            KUBELET_PLUGIN,
            ns,
            vec![rule("apps", &["deployments"], &MANAGE)],
        );
    }
    rbac.role(
        KUBELET_PLUGIN_VALIDATION,
        KUBELET_PLUGIN,
        ns,
        vec![rule("apps", &["daemonsets"], &["list"])],
    );
    if input.compute_domains.is_some() {
        rbac.account(CONTROLLER);
        rbac.cluster_role(CONTROLLER, CONTROLLER, ns, controller_cluster_rules());
        rbac.role(
            CONTROLLER,
            CONTROLLER,
            ns,
            vec![
                rule("apps", &["daemonsets"], &MANAGE),
                rule(
                    CD_GROUP,
                    &["computedomaincliques"],
                    &["get", "list", "watch", "update"],
                ),
                rule("coordination.k8s.io", &["leases"], &["create"]),
                PolicyRule {
                    resource_names: Some(vec![CONTROLLER.to_owned()]),
                    ..rule("coordination.k8s.io", &["leases"], &["get", "update"])
                },
            ],
        );
        rbac.account(DAEMON_ACCOUNT);
        rbac.cluster_role(DAEMON, DAEMON_ACCOUNT, ns, daemon_rules());
    }
    rbac
}

/// ClusterRole `nvidia-dra-driver-kubeletplugin`.
fn kubelet_plugin_rules() -> Vec<PolicyRule> {
    vec![
        rule(CD_GROUP, &["computedomains"], &READ),
        rule("resource.k8s.io", &["resourceclaims"], &READ),
        rule(
            "resource.k8s.io",
            &["resourceslices"],
            &["get", "list", "watch", "create", "update", "delete"],
        ),
        rule("", &["nodes"], &["get", "list", "watch", "update", "patch"]),
        rule("", &["pods"], &READ),
    ]
}

/// ClusterRole `nvidia-dra-driver-controller`: ComputeDomains and the ResourceClaimTemplates it
/// creates for them in the workloads' namespaces, nodes and pods.
fn controller_cluster_rules() -> Vec<PolicyRule> {
    vec![
        rule(
            CD_GROUP,
            &["computedomains"],
            &["get", "list", "watch", "update"],
        ),
        rule(CD_GROUP, &["computedomains/status"], &["update"]),
        rule(
            "resource.k8s.io",
            &["resourceclaimtemplates"],
            &["get", "list", "watch", "create", "update", "delete"],
        ),
        rule("", &["nodes"], &["get", "list", "watch", "update"]),
        rule("", &["pods"], &READ),
    ]
}

/// ClusterRole `compute-domain-daemon`.
fn daemon_rules() -> Vec<PolicyRule> {
    vec![
        rule(
            CD_GROUP,
            &["computedomains", "computedomains/status"],
            &["get", "list", "watch", "update", "patch"],
        ),
        rule(
            CD_GROUP,
            &["computedomaincliques"],
            &["get", "list", "watch", "create", "update", "patch"],
        ),
        rule("", &["pods"], &["get", "list", "watch", "patch"]),
    ]
}

fn metadata(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        labels: Some(labels(name)),
        ..ObjectMeta::default()
    }
}

/// Our labels of an object `name` of this operand.
pub fn labels(name: &str) -> BTreeMap<String, String> {
    meta::labels(name, DraDriver::NAME)
}

fn subjects(account: &str, namespace: &str) -> Vec<Subject> {
    vec![Subject {
        kind: "ServiceAccount".to_owned(),
        name: account.to_owned(),
        namespace: Some(namespace.to_owned()),
        ..Subject::default()
    }]
}

fn role_ref(kind: &str, name: &str) -> RoleRef {
    RoleRef {
        api_group: "rbac.authorization.k8s.io".to_owned(),
        kind: kind.to_owned(),
        name: name.to_owned(),
    }
}

impl Rbac {
    fn account(&mut self, name: &str) {
        self.service_accounts.push(ServiceAccount {
            metadata: metadata(name),
            ..ServiceAccount::default()
        });
    }

    /// Role `name` with `rules`, bound to ServiceAccount `account`.
    fn role(&mut self, name: &str, account: &str, namespace: &str, rules: Vec<PolicyRule>) {
        self.roles.push(Role {
            metadata: metadata(name),
            rules: Some(rules),
        });
        self.role_bindings.push(RoleBinding {
            metadata: metadata(name),
            role_ref: role_ref("Role", name),
            subjects: Some(subjects(account, namespace)),
        });
    }

    /// ClusterRole `name` with `rules`, bound to ServiceAccount `account` of `namespace`.
    fn cluster_role(&mut self, name: &str, account: &str, namespace: &str, rules: Vec<PolicyRule>) {
        self.cluster_roles.push(ClusterRole {
            metadata: metadata(name),
            rules: Some(rules),
            ..ClusterRole::default()
        });
        self.cluster_role_bindings.push(ClusterRoleBinding {
            metadata: metadata(name),
            role_ref: role_ref("ClusterRole", name),
            subjects: Some(subjects(account, namespace)),
        });
    }
}
