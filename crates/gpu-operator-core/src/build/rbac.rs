//! Builders of an operand's identity and permissions: its ServiceAccount, Roles and ClusterRoles
//! and their bindings to that ServiceAccount. By NVIDIA's convention all of them share the
//! operand's name (`nvidia-operator-validator`, `nvidia-device-plugin`, …).

use k8s_openapi::{
    api::{
        core::v1::ServiceAccount,
        rbac::v1::{
            ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
        },
    },
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};

use crate::build::meta;

/// Names one operand's RBAC objects: `name` (the operand's ServiceAccount and roles) and the
/// reconciler `component` that owns them.
#[derive(Clone, Copy, Debug)]
pub struct Identity<'a> {
    /// Name of the ServiceAccount, roles and bindings.
    pub name: &'a str,
    /// Reconciler that owns them (`app.kubernetes.io/component`).
    pub component: &'a str,
}

impl Identity<'_> {
    fn metadata(&self) -> ObjectMeta {
        ObjectMeta {
            name: Some(self.name.to_owned()),
            labels: Some(meta::labels(self.name, self.component)),
            ..ObjectMeta::default()
        }
    }

    fn subjects(&self, namespace: &str) -> Vec<Subject> {
        vec![Subject {
            kind: "ServiceAccount".to_owned(),
            name: self.name.to_owned(),
            namespace: Some(namespace.to_owned()),
            ..Subject::default()
        }]
    }

    fn role_ref(&self, kind: &str) -> RoleRef {
        RoleRef {
            api_group: "rbac.authorization.k8s.io".to_owned(),
            kind: kind.to_owned(),
            name: self.name.to_owned(),
        }
    }

    /// The ServiceAccount.
    pub fn service_account(&self) -> ServiceAccount {
        ServiceAccount {
            metadata: self.metadata(),
            ..ServiceAccount::default()
        }
    }

    /// A ClusterRole with `rules`.
    pub fn cluster_role(&self, rules: Vec<PolicyRule>) -> ClusterRole {
        ClusterRole {
            metadata: self.metadata(),
            rules: Some(rules),
            ..ClusterRole::default()
        }
    }

    /// Binds the ClusterRole to the ServiceAccount in `namespace`.
    pub fn cluster_role_binding(&self, namespace: &str) -> ClusterRoleBinding {
        ClusterRoleBinding {
            metadata: self.metadata(),
            role_ref: self.role_ref("ClusterRole"),
            subjects: Some(self.subjects(namespace)),
        }
    }

    /// A Role with `rules` (in the operator namespace).
    pub fn role(&self, rules: Vec<PolicyRule>) -> Role {
        Role {
            metadata: self.metadata(),
            rules: Some(rules),
        }
    }

    /// Binds the Role to the ServiceAccount in `namespace`.
    pub fn role_binding(&self, namespace: &str) -> RoleBinding {
        RoleBinding {
            metadata: self.metadata(),
            role_ref: self.role_ref("Role"),
            subjects: Some(self.subjects(namespace)),
        }
    }
}

/// A rule granting `verbs` on `resources` of API group `group` (`""` is the core group).
pub fn rule(group: &str, resources: &[&str], verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.to_owned()]),
        resources: Some(resources.iter().map(|r| (*r).to_owned()).collect()),
        verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
        ..PolicyRule::default()
    }
}
