//! An operand pod as the count of out-of-sync pods reads it (`Operand::POD_IN_SYNC`): its name,
//! labels, owners and deletion, and what its containers run (`spec.containers`, `spec.volumes`).
//! It deserializes straight from a Pod list, so the rest of each Pod (init containers, managed
//! fields, status, tolerations, affinity) is skipped by the parser instead of being allocated: a
//! heap profile of a driver upgrade showed DriverReady's pages of full driver Pods as the
//! operator's peak, and the allocator keeps a process's peak as resident memory.

use std::collections::BTreeMap;

use k8s_openapi::{
    NamespaceResourceScope,
    api::core::v1::{Container, Pod, PodSpec, Volume},
    apimachinery::pkg::apis::meta::v1::{OwnerReference, Time},
};
use kube::api::ObjectMeta;
use serde::Deserialize;

/// The parts of a Pod that say what it installs and whose it is.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(from = "Wire")]
pub struct PodInstall {
    metadata: ObjectMeta,
    spec: PodSpec,
}

crate::projection!(PodInstall, Pod, NamespaceResourceScope);

impl From<PodInstall> for Pod {
    /// A Pod with only the fields read (the rest default), for `Operand::POD_IN_SYNC`.
    fn from(pod: PodInstall) -> Self {
        Self {
            metadata: pod.metadata,
            spec: Some(pod.spec),
            status: None,
        }
    }
}

/// The parts of a Pod's JSON that are read; serde skips every other field.
#[derive(Deserialize)]
struct Wire {
    #[serde(default)]
    metadata: WireMeta,
    #[serde(default)]
    spec: WireSpec,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireMeta {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    labels: Option<BTreeMap<String, String>>,
    owner_references: Option<Vec<OwnerReference>>,
    deletion_timestamp: Option<Time>,
}

#[derive(Default, Deserialize)]
struct WireSpec {
    #[serde(default)]
    containers: Vec<Container>,
    volumes: Option<Vec<Volume>>,
}

impl From<Wire> for PodInstall {
    fn from(wire: Wire) -> Self {
        let WireMeta {
            name,
            namespace,
            uid,
            labels,
            owner_references,
            deletion_timestamp,
        } = wire.metadata;
        Self {
            metadata: ObjectMeta {
                name,
                namespace,
                uid,
                labels,
                owner_references,
                deletion_timestamp,
                ..ObjectMeta::default()
            },
            spec: PodSpec {
                containers: wire.spec.containers,
                volumes: wire.spec.volumes,
                ..PodSpec::default()
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use kube::Resource as _;
    use serde_json::json;

    use super::*;

    #[test]
    fn a_pod_is_read_down_to_what_it_installs_and_whose_it_is() {
        let full = json!({
            "metadata": {
                "name": "nvidia-driver-daemonset-x", "namespace": "gpu-operator", "uid": "u1",
                "labels": {"app": "nvidia-driver-daemonset", "pod-template-generation": "3"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet",
                    "name": "nvidia-driver-daemonset", "uid": "ds1", "controller": true}],
                "deletionTimestamp": "2026-11-25T04:00:00Z",
                "annotations": {"a": "b"},
                "managedFields": [{"manager": "kube-controller-manager", "fieldsV1": {"f:spec": {}}}]
            },
            "spec": {
                "nodeName": "n1",
                "initContainers": [{"name": "k8s-driver-manager", "image": "manager:1"}],
                "containers": [{"name": "nvidia-driver-ctr", "image": "driver:580",
                    "env": [{"name": "A", "value": "1"}],
                    "volumeMounts": [{"name": "run", "mountPath": "/run/nvidia"}]}],
                "volumes": [{"name": "run", "hostPath": {"path": "/run/nvidia"}}],
                "tolerations": [{"operator": "Exists"}]
            },
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        });
        let pod = Pod::from(serde_json::from_value::<PodInstall>(full.clone()).unwrap());
        let whole: Pod = serde_json::from_value(full).unwrap();
        // What the count reads is kept as it was sent…
        assert_eq!(pod.metadata.name, whole.metadata.name);
        assert_eq!(pod.metadata.uid, whole.metadata.uid);
        assert_eq!(pod.metadata.labels, whole.metadata.labels);
        assert_eq!(
            pod.metadata.owner_references,
            whole.metadata.owner_references
        );
        assert_eq!(
            pod.metadata.deletion_timestamp,
            whole.metadata.deletion_timestamp
        );
        let (spec, whole_spec) = (pod.spec.unwrap(), whole.spec.unwrap());
        assert_eq!(spec.containers, whole_spec.containers);
        assert_eq!(spec.volumes, whole_spec.volumes);
        // …and the rest is not kept at all.
        assert!(pod.metadata.managed_fields.is_none() && pod.metadata.annotations.is_none());
        assert!(spec.init_containers.is_none() && spec.tolerations.is_none());
        assert!(spec.node_name.is_none() && pod.status.is_none());
        assert_eq!(PodInstall::plural(&()), "pods");
    }
}
