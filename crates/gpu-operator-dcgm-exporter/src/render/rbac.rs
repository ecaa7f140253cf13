//! The exporter's identity and permissions: Role `nvidia-dcgm-exporter` reads ConfigMaps (a
//! metrics list named by `DCGM_EXPORTER_CONFIGMAP_DATA`); ClusterRole
//! `nvidia-dcgm-exporter-read-pods` reads pods, rendered only when metrics carry pod labels or
//! UIDs. (NVIDIA's Role also lets it use OpenShift's privileged SCC, which does not apply here.)

use gpu_operator_core::{
    build::{
        meta,
        rbac::{Identity, rule},
    },
    contract::Operand as _,
};
use k8s_openapi::{
    api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleRef, Subject},
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};

use crate::{DcgmExporter, NAME, READ_PODS};

/// The ServiceAccount, Role and RoleBinding share the DaemonSet's name.
pub const IDENTITY: Identity<'static> = Identity {
    name: NAME,
    component: DcgmExporter::NAME,
};

/// Role `nvidia-dcgm-exporter`: ConfigMaps get and list.
pub fn role() -> Role {
    IDENTITY.role(vec![rule("", &["configmaps"], &["get", "list"])])
}

fn read_pods_metadata() -> ObjectMeta {
    ObjectMeta {
        name: Some(READ_PODS.to_owned()),
        labels: Some(meta::labels(NAME, DcgmExporter::NAME)),
        ..ObjectMeta::default()
    }
}

/// ClusterRole `nvidia-dcgm-exporter-read-pods`: pods get, list and watch.
pub fn read_pods() -> ClusterRole {
    ClusterRole {
        metadata: read_pods_metadata(),
        rules: Some(vec![rule("", &["pods"], &["get", "list", "watch"])]),
        ..ClusterRole::default()
    }
}

/// Binds `nvidia-dcgm-exporter-read-pods` to the exporter's ServiceAccount in `namespace`.
pub fn read_pods_binding(namespace: &str) -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: read_pods_metadata(),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".to_owned(),
            kind: "ClusterRole".to_owned(),
            name: READ_PODS.to_owned(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".to_owned(),
            name: NAME.to_owned(),
            namespace: Some(namespace.to_owned()),
            ..Subject::default()
        }]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reading_pods_is_bound_to_the_exporter_service_account() {
        let binding = read_pods_binding("gpu-operator");
        assert_eq!(binding.role_ref.name, READ_PODS);
        let subject = &binding.subjects.unwrap()[0];
        assert_eq!(
            (subject.name.as_str(), subject.namespace.as_deref()),
            (NAME, Some("gpu-operator"))
        );
        assert_eq!(
            read_pods().rules.unwrap()[0].verbs,
            ["get", "list", "watch"]
        );
        assert_eq!(
            role().rules.unwrap()[0].resources.as_ref().unwrap(),
            &["configmaps"]
        );
    }
}
