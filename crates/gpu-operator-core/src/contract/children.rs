//! What an operand renders: [`Children`], every kind of object in the order it is applied. How
//! the pipeline writes them is in [`crate::pipeline::children`].

use k8s_openapi::api::{
    admissionregistration::v1::{ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding},
    apps::v1::{DaemonSet, Deployment},
    core::v1::{ConfigMap, Service, ServiceAccount},
    node::v1::RuntimeClass,
    rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding},
    resource::v1::{DeviceClass, ResourceClaimTemplate},
};
use kube::api::DynamicObject;

/// Every kind of object an operand may render, in the order they are applied (identities and
/// permissions before the workloads that use them). Destructured exhaustively on apply, so a new
/// kind cannot be forgotten.
#[derive(Clone, Debug, Default)]
pub struct Children {
    /// ServiceAccounts (operator namespace).
    pub service_accounts: Vec<ServiceAccount>,
    /// Roles (operator namespace).
    pub roles: Vec<Role>,
    /// RoleBindings (operator namespace).
    pub role_bindings: Vec<RoleBinding>,
    /// ClusterRoles.
    pub cluster_roles: Vec<ClusterRole>,
    /// ClusterRoleBindings.
    pub cluster_role_bindings: Vec<ClusterRoleBinding>,
    /// ConfigMaps (operator namespace).
    pub config_maps: Vec<ConfigMap>,
    /// Services (operator namespace).
    pub services: Vec<Service>,
    /// RuntimeClasses.
    pub runtime_classes: Vec<RuntimeClass>,
    /// ValidatingAdmissionPolicies.
    pub admission_policies: Vec<ValidatingAdmissionPolicy>,
    /// ValidatingAdmissionPolicyBindings.
    pub admission_policy_bindings: Vec<ValidatingAdmissionPolicyBinding>,
    /// DRA DeviceClasses (`resource.k8s.io/v1`).
    pub device_classes: Vec<DeviceClass>,
    /// DRA ResourceClaimTemplates (`resource.k8s.io/v1`, operator namespace).
    pub resource_claim_templates: Vec<ResourceClaimTemplate>,
    /// DaemonSets (operator namespace).
    pub daemonsets: Vec<DaemonSet>,
    /// Deployments (operator namespace).
    pub deployments: Vec<Deployment>,
    /// Prometheus Operator ServiceMonitors (operator namespace), written only while their CRD is
    /// installed; build them with [`crate::build::service_monitor::build`].
    pub service_monitors: Vec<DynamicObject>,
    /// Prometheus Operator PrometheusRules (operator namespace), written only while their CRD is
    /// installed; build them with [`crate::build::prometheus_rule::build`].
    pub prometheus_rules: Vec<DynamicObject>,
}

impl Children {
    /// How many objects there are, of every kind.
    pub fn len(&self) -> usize {
        let Self {
            service_accounts,
            roles,
            role_bindings,
            cluster_roles,
            cluster_role_bindings,
            config_maps,
            services,
            runtime_classes,
            admission_policies,
            admission_policy_bindings,
            device_classes,
            resource_claim_templates,
            daemonsets,
            deployments,
            service_monitors,
            prometheus_rules,
        } = self;
        service_accounts.len()
            + roles.len()
            + role_bindings.len()
            + cluster_roles.len()
            + cluster_role_bindings.len()
            + config_maps.len()
            + services.len()
            + runtime_classes.len()
            + admission_policies.len()
            + admission_policy_bindings.len()
            + device_classes.len()
            + resource_claim_templates.len()
            + daemonsets.len()
            + deployments.len()
            + service_monitors.len()
            + prometheus_rules.len()
    }

    /// Whether nothing is rendered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
