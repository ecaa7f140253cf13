//! A pod on a node being upgraded, as the states that wait for jobs, evict GPU pods or drain read
//! it ([`Workload`]). It deserializes straight from the node's pod list, so the rest of each Pod
//! (env, probes, managed fields, most of the status) is skipped by the parser instead of being
//! allocated: up to 16 nodes are listed at once, each with every pod it runs, and the allocator
//! keeps a process's peak as resident memory.

use std::collections::BTreeMap;

use gpu_operator_api::labels;
use k8s_openapi::{api::core::v1::Pod, apimachinery::pkg::apis::meta::v1::OwnerReference};
use kube::api::ObjectMeta;
use serde::{Deserialize, de::IgnoredAny};

use crate::facts::Workload;

/// The annotation of a static pod's mirror, which the API cannot evict.
const MIRROR: &str = "kubernetes.io/config.mirror";

/// A pod of a node's list, read down to its [`Workload`].
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(from = "Wire")]
pub struct WorkloadPod {
    metadata: ObjectMeta,
    /// What the state machine reads of it.
    pub workload: Workload,
}

gpu_operator_core::projection!(WorkloadPod, Pod, k8s_openapi::NamespaceResourceScope);

/// The parts of a Pod's JSON that are read; serde skips every other field.
#[derive(Deserialize)]
struct Wire {
    #[serde(default)]
    metadata: WireMeta,
    #[serde(default)]
    spec: WireSpec,
    #[serde(default)]
    status: WireStatus,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(
    clippy::zero_sized_map_values,
    reason = "a JSON object whose values the parser skips: only its keys are read"
)]
struct WireMeta {
    name: Option<String>,
    namespace: Option<String>,
    labels: Option<BTreeMap<String, String>>,
    /// Only the keys are read.
    annotations: Option<BTreeMap<String, IgnoredAny>>,
    owner_references: Option<Vec<OwnerReference>>,
    deletion_timestamp: Option<IgnoredAny>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(
    clippy::zero_sized_map_values,
    reason = "a JSON object whose values the parser skips: only its keys are read"
)]
struct WireSpec {
    #[serde(default)]
    containers: Vec<WireContainer>,
    #[serde(default)]
    init_containers: Vec<WireContainer>,
    #[serde(default)]
    volumes: Vec<WireVolume>,
    runtime_class_name: Option<String>,
    /// Only the keys are read.
    node_selector: Option<BTreeMap<String, IgnoredAny>>,
    #[serde(default)]
    resource_claims: Vec<WireClaim>,
}

/// A pod's claim: by name, or made from a template (its name then in the status).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireClaim {
    resource_claim_name: Option<String>,
}

#[derive(Deserialize)]
struct WireContainer {
    resources: Option<WireResources>,
}

/// Only the resource names are read.
#[derive(Deserialize)]
#[allow(
    clippy::zero_sized_map_values,
    reason = "JSON objects whose values the parser skips: only their keys are read"
)]
struct WireResources {
    limits: Option<BTreeMap<String, IgnoredAny>>,
    requests: Option<BTreeMap<String, IgnoredAny>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireVolume {
    empty_dir: Option<IgnoredAny>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireStatus {
    phase: Option<String>,
    /// The claims made from templates, named by the API server.
    #[serde(default)]
    resource_claim_statuses: Vec<WireClaim>,
}

/// Whether a resource name is an NVIDIA device: NVIDIA's filter (`nvidia.com/gpu*`,
/// `nvidia.com/mig-*`) widened to every `nvidia.com/` resource, so shared (`nvidia.com/gpu.shared`)
/// and passthrough GPUs (`nvidia.com/GA102GL_A10`) count too.
fn is_gpu(resource: &str) -> bool {
    resource.starts_with("nvidia.com/")
}

impl From<Wire> for WorkloadPod {
    fn from(wire: Wire) -> Self {
        let WireMeta {
            name,
            namespace,
            labels,
            annotations,
            owner_references,
            deletion_timestamp,
        } = wire.metadata;
        let controller = owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true));
        let gpu = wire
            .spec
            .containers
            .iter()
            .chain(&wire.spec.init_containers)
            .filter_map(|c| c.resources.as_ref())
            .flat_map(|r| r.limits.iter().chain(&r.requests))
            .any(|names| names.keys().any(|k| is_gpu(k)));
        let workload = Workload {
            namespace: namespace.clone().unwrap_or_default(),
            name: name.clone().unwrap_or_default(),
            labels: labels.unwrap_or_default(),
            gpu,
            finished: matches!(wire.status.phase.as_deref(), Some("Succeeded" | "Failed")),
            terminating: deletion_timestamp.is_some(),
            daemonset: controller.is_some_and(|o| o.kind == "DaemonSet"),
            controlled: controller.is_some(),
            empty_dir: wire.spec.volumes.iter().any(|v| v.empty_dir.is_some()),
            runtime_class: wire.spec.runtime_class_name,
            mirror: annotations.is_some_and(|a| a.contains_key(MIRROR)),
            client: wire
                .spec
                .node_selector
                .is_some_and(|s| s.contains_key(labels::DEPLOY_CLIENT)),
            claims: wire
                .spec
                .resource_claims
                .into_iter()
                .chain(wire.status.resource_claim_statuses)
                .filter_map(|c| c.resource_claim_name)
                .collect(),
            dra_claim: None,
        };
        Self {
            metadata: ObjectMeta {
                name,
                namespace,
                ..ObjectMeta::default()
            },
            workload,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn read(pod: serde_json::Value) -> Workload {
        serde_json::from_value::<WorkloadPod>(pod).unwrap().workload
    }

    #[test]
    fn a_pod_is_read_down_to_what_the_upgrade_decides_on() {
        // A training job's pod: GPU in an init container's requests, an emptyDir, controlled by
        // a Job, finished; plus fields the parser must skip.
        let job = read(json!({
            "metadata": {
                "name": "train-0", "namespace": "ml", "labels": {"app": "training"},
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"},
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "train",
                    "uid": "j1", "controller": true}],
                "managedFields": [{"manager": "kubelet"}]
            },
            "spec": {
                "nodeName": "n1",
                "initContainers": [{"name": "fetch", "resources": {"requests": {"nvidia.com/gpu": "1"}}}],
                "containers": [{"name": "main", "env": [{"name": "A", "value": "1"}],
                    "resources": {"limits": {"cpu": "1"}}}],
                "volumes": [{"name": "scratch", "emptyDir": {}}, {"name": "h", "hostPath": {"path": "/x"}}]
            },
            "status": {"phase": "Succeeded", "conditions": [{"type": "Ready", "status": "False"}]}
        }));
        assert_eq!(
            job,
            Workload {
                namespace: "ml".into(),
                name: "train-0".into(),
                labels: BTreeMap::from([("app".into(), "training".into())]),
                gpu: true,
                finished: true,
                terminating: false,
                daemonset: false,
                controlled: true,
                empty_dir: true,
                mirror: false,
                runtime_class: None,
                client: false,
                claims: Vec::new(),
                dra_claim: None,
            }
        );
        // A static pod's mirror being deleted, a MIG device in its limits, no controller.
        let mirror = read(json!({
            "metadata": {
                "name": "etcd-n1", "namespace": "kube-system",
                "annotations": {"kubernetes.io/config.mirror": "abc"},
                "deletionTimestamp": "2026-11-25T04:00:00Z"
            },
            "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/mig-1g.10gb": "1"}}}]},
            "status": {"phase": "Running"}
        }));
        assert!(mirror.mirror && mirror.terminating && mirror.gpu);
        assert!(!mirror.controlled && !mirror.finished && !mirror.empty_dir);
        // A DaemonSet's pod without GPU resources.
        let agent = read(json!({
            "metadata": {"name": "agent-x", "namespace": "ops", "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "d",
                 "controller": true}]},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"memory": "1Gi"}}}]}
        }));
        assert!(agent.daemonset && agent.controlled && !agent.gpu);
        // A standalone exporter under the NVIDIA runtime class, requesting nothing: a GPU user by
        // its runtime class; a shared GPU counts as a device.
        let exporter = read(json!({
            "metadata": {"name": "dcgm-exporter-x", "namespace": "monitoring", "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "dcgm-exporter", "uid": "e",
                 "controller": true}]},
            "spec": {"runtimeClassName": "nvidia", "containers": [{"name": "c"}]}
        }));
        let ours = ["nvidia".to_owned(), "nvidia-cdi".to_owned()];
        assert!(!exporter.gpu && exporter.gpu_use(&[]).is_none());
        assert_eq!(
            exporter.gpu_use(&ours).as_deref(),
            Some("runtime class nvidia")
        );
        // A GPU client of NVIDIA's v26.7 contract: its nodeSelector names the client label.
        let client = read(json!({
            "metadata": {"name": "agent-y", "namespace": "ops"},
            "spec": {"nodeSelector": {"nvidia.com/gpu.deploy.client": "true"}, "containers": [{"name": "c"}]}
        }));
        assert_eq!(
            client.gpu_use(&ours).as_deref(),
            Some("nodeSelector nvidia.com/gpu.deploy.client")
        );
        // DRA claims, by name and made from a template; which driver allocated them is looked up.
        let dra = read(json!({
            "metadata": {"name": "infer", "namespace": "ml"},
            "spec": {"containers": [{"name": "c"}], "resourceClaims": [
                {"name": "gpu", "resourceClaimName": "shared-gpu"},
                {"name": "t", "resourceClaimTemplateName": "one-gpu"}]},
            "status": {"resourceClaimStatuses": [{"name": "t", "resourceClaimName": "infer-t-x7"}]}
        }));
        assert_eq!(dra.claims, ["shared-gpu", "infer-t-x7"]);
        assert_eq!(dra.gpu_use(&ours), None, "until a claim is NVIDIA's");
        let dra = Workload {
            dra_claim: Some("infer-t-x7".into()),
            ..dra
        };
        assert_eq!(dra.gpu_use(&ours).as_deref(), Some("DRA claim infer-t-x7"));
        let shared = read(json!({
            "metadata": {"name": "s", "namespace": "ml"},
            "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu.shared": "1"}}}]}
        }));
        assert_eq!(shared.gpu_use(&[]).as_deref(), Some(""));
        let done = Workload {
            finished: true,
            ..shared
        };
        assert_eq!(done.gpu_use(&ours), None, "a finished pod holds nothing");
    }
}
