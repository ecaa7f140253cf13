//! The exporter's identity and permissions: Role `nvidia-dcgm-exporter` reads ConfigMaps (a
//! metrics list named by `DCGM_EXPORTER_CONFIGMAP_DATA`); ClusterRole
//! `nvidia-dcgm-exporter-read-pods` reads pods, rendered only when metrics carry pod labels or
//! UIDs. (NVIDIA's Role also lets it use OpenShift's privileged SCC, which does not apply here.)
//! The GPUCluster's, as NVIDIA's: the same under `nvidia-dcgm-exporter-dra` names, its Role also
//! reading ResourceClaims, its ClusterRole (always rendered) also ResourceSlices.

use gpu_operator_core::build::{
    meta,
    rbac::{Identity, rule},
};
use k8s_openapi::{
    api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleRef, Subject},
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};

use crate::Form;

/// Read, list and watch.
const READ: &[&str] = &["get", "list", "watch"];

/// The ServiceAccount, Role and RoleBinding share the DaemonSet's name.
pub fn identity(form: &Form) -> Identity<'static> {
    Identity {
        name: form.name(),
        component: form.component(),
    }
}

/// Role `nvidia-dcgm-exporter`: ConfigMaps get and list; the GPUCluster's first ResourceClaims
/// get, list and watch.
pub fn role(form: &Form) -> Role {
    let mut rules = Vec::new();
    if form.is_dra() {
        rules.push(rule("resource.k8s.io", &["resourceclaims"], READ));
    }
    rules.push(rule("", &["configmaps"], &["get", "list"]));
    identity(form).role(rules)
}

fn read_pods_metadata(form: &Form) -> ObjectMeta {
    ObjectMeta {
        name: Some(form.read_pods().to_owned()),
        labels: Some(meta::labels(form.name(), form.component())),
        ..ObjectMeta::default()
    }
}

/// ClusterRole `nvidia-dcgm-exporter-read-pods`: pods get, list and watch; the GPUCluster's also
/// ResourceSlices.
pub fn read_pods(form: &Form) -> ClusterRole {
    let mut rules = vec![rule("", &["pods"], READ)];
    if form.is_dra() {
        rules.push(rule("resource.k8s.io", &["resourceslices"], READ));
    }
    ClusterRole {
        metadata: read_pods_metadata(form),
        rules: Some(rules),
        ..ClusterRole::default()
    }
}

/// Binds the read-pods ClusterRole to the exporter's ServiceAccount in `namespace`.
pub fn read_pods_binding(form: &Form, namespace: &str) -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: read_pods_metadata(form),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".to_owned(),
            kind: "ClusterRole".to_owned(),
            name: form.read_pods().to_owned(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".to_owned(),
            name: form.name().to_owned(),
            namespace: Some(namespace.to_owned()),
            ..Subject::default()
        }]),
    }
}

#[cfg(test)]
mod tests {
    use gpu_operator_core::build::runtime_class::GpuAccess;

    use super::*;
    use crate::{DRA_NAME, DRA_READ_PODS, NAME, READ_PODS};

    fn cluster_policy() -> Form {
        Form::ClusterPolicy {
            validator_image: "v:1".to_owned(),
            gpu_access: GpuAccess::RuntimeClass("nvidia".to_owned()),
        }
    }

    fn resources(rules: Option<Vec<k8s_openapi::api::rbac::v1::PolicyRule>>) -> Vec<String> {
        rules
            .unwrap()
            .into_iter()
            .flat_map(|r| r.resources.unwrap())
            .collect()
    }

    #[test]
    fn reading_pods_is_bound_to_the_exporter_service_account() {
        let binding = read_pods_binding(&cluster_policy(), "gpu-operator");
        assert_eq!(binding.role_ref.name, READ_PODS);
        let subject = &binding.subjects.unwrap()[0];
        assert_eq!(
            (subject.name.as_str(), subject.namespace.as_deref()),
            (NAME, Some("gpu-operator"))
        );
        assert_eq!(
            read_pods(&cluster_policy()).rules.unwrap()[0].verbs,
            ["get", "list", "watch"]
        );
        assert_eq!(resources(role(&cluster_policy()).rules), ["configmaps"]);
    }

    #[test]
    fn the_gpu_clusters_exporter_also_reads_resource_claims_and_slices() {
        let form = Form::GpuCluster;
        assert_eq!(
            resources(role(&form).rules),
            ["resourceclaims", "configmaps"]
        );
        assert_eq!(
            resources(read_pods(&form).rules),
            ["pods", "resourceslices"]
        );
        let binding = read_pods_binding(&form, "ns");
        assert_eq!(binding.role_ref.name, DRA_READ_PODS);
        assert_eq!(binding.subjects.unwrap()[0].name, DRA_NAME);
    }
}
