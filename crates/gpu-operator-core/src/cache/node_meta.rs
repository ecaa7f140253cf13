//! A Node as the shared node cache holds it: name, uid, version, every label, and the one
//! annotation anything here reads (the validators' report). At thousands of nodes the cache is
//! the operator's largest structure, so labels are stored compactly (see [`Labels`]).
//!
//! The type shadows `ResourceExt::labels` with its own method, so reading `node.labels()` gives
//! the compact labels, never the empty map of its bare `ObjectMeta`; the report is `validation()`.

use gpu_operator_api::node_validation;
use k8s_openapi::{ClusterResourceScope, api::core::v1::Node};
use kube::{api::ObjectMeta, core::PartialObjectMeta};
use serde::Deserialize;

pub use super::node_labels::Labels;

/// A cached Node's metadata. `Api<NodeMeta>` asks the API server for the metadata-only form
/// (`PartialObjectMetadata`) and deserializes it straight into this type.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(from = "PartialObjectMeta<Node>")]
pub struct NodeMeta {
    metadata: ObjectMeta,
    labels: Labels,
    validation: Option<Box<str>>,
}

impl NodeMeta {
    /// A node named `name` with `labels` (for tests and fixtures; the cache converts watched
    /// metadata).
    pub fn new(name: &str, labels: &[(&str, &str)]) -> Self {
        Self {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            labels: Labels::from_pairs(labels),
            validation: None,
        }
    }

    /// This node with the validators' `report`.
    #[must_use]
    pub fn with_validation(mut self, report: &str) -> Self {
        self.validation = Some(report.into());
        self
    }

    /// The node's name.
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// The node's labels.
    pub fn labels(&self) -> &Labels {
        &self.labels
    }

    /// The validators' report on the node (annotation [`node_validation::ANNOTATION`]).
    pub fn validation(&self) -> Option<&str> {
        self.validation.as_deref()
    }

    /// Whether `new` has other labels than `old`, or is another node under the same name (what
    /// the operands, the overall status and the node labeller are woken by).
    pub fn labels_changed(old: &Self, new: &Self) -> bool {
        old.labels != new.labels || old.metadata.uid != new.metadata.uid
    }

    /// Whether `new` differs from `old` in what the validators' summary reads: GPU presence
    /// (label [`gpu_operator_api::labels::GPU_PRESENT`]), the stack it runs (the sandbox
    /// validator's gate) and the report.
    pub fn report_changed(old: &Self, new: &Self) -> bool {
        use gpu_operator_api::labels::{DEPLOY_SANDBOX_VALIDATOR, GPU_PRESENT};
        [GPU_PRESENT, DEPLOY_SANDBOX_VALIDATOR]
            .iter()
            .any(|key| old.labels.get(key) != new.labels.get(key))
            || old.validation != new.validation
    }
}

impl From<PartialObjectMeta<Node>> for NodeMeta {
    fn from(node: PartialObjectMeta<Node>) -> Self {
        let meta = node.metadata;
        let validation = meta
            .annotations
            .and_then(|mut a| a.remove(node_validation::ANNOTATION))
            .map(String::into_boxed_str);
        Self {
            metadata: ObjectMeta {
                name: meta.name,
                uid: meta.uid,
                resource_version: meta.resource_version,
                ..ObjectMeta::default()
            },
            labels: meta.labels.map(Labels::from).unwrap_or_default(),
            validation,
        }
    }
}

crate::projection!(NodeMeta, Node, ClusterResourceScope, metadata_only);

#[cfg(test)]
mod tests {
    use kube::{Resource as _, ResourceExt as _};
    use serde_json::json;

    use super::*;

    fn partial(value: serde_json::Value) -> PartialObjectMeta<Node> {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn name_uid_version_labels_and_the_validation_report_are_kept_and_nothing_else() {
        let node: NodeMeta = partial(json!({
            "metadata": {
                "name": "gpu-1",
                "uid": "u-1",
                "resourceVersion": "42",
                "labels": {"nvidia.com/gpu.present": "true", "kubernetes.io/hostname": "gpu-1"},
                "annotations": {
                    node_validation::ANNOTATION: "driver=ok",
                    "nfd.node.kubernetes.io/feature-labels": "cpu-cpuid.AVX,cpu-cpuid.AVX2"
                },
                "managedFields": [{"manager": "kubelet", "fieldsV1": {"f:status": {}}}],
                "creationTimestamp": "2026-11-22T10:00:00Z"
            }
        }))
        .into();
        assert_eq!(node.name_any(), "gpu-1");
        assert_eq!(node.uid().as_deref(), Some("u-1"));
        assert_eq!(node.resource_version().as_deref(), Some("42"));
        assert_eq!(node.labels().get("nvidia.com/gpu.present"), Some("true"));
        assert_eq!(node.labels().get("kubernetes.io/hostname"), Some("gpu-1"));
        assert_eq!(node.labels().get("nvidia.com/gpu.deploy.driver"), None);
        assert_eq!(node.validation(), Some("driver=ok"));
        assert!(node.meta().annotations.is_none() && node.meta().managed_fields.is_none());
        assert!(node.meta().creation_timestamp.is_none());
        assert_eq!(NodeMeta::plural(&()), "nodes");
        assert!(NodeMeta::metadata_api(), "watched as metadata only");
    }

    #[test]
    fn label_and_report_changes_are_told_apart_from_heartbeats() {
        let node = |uid: &str, version: &str, labels: serde_json::Value, report: Option<&str>| {
            let annotations = report.map(|r| json!({node_validation::ANNOTATION: r}));
            NodeMeta::from(partial(json!({
                "metadata": {
                    "name": "gpu-1", "uid": uid, "resourceVersion": version,
                    "labels": labels, "annotations": annotations,
                }
            })))
        };
        let gpu = json!({"nvidia.com/gpu.present": "true", "x": "1"});
        let base = node("u1", "1", gpu.clone(), None);
        let heartbeat = node("u1", "2", gpu.clone(), None);
        assert!(!NodeMeta::labels_changed(&base, &heartbeat));
        assert!(!NodeMeta::report_changed(&base, &heartbeat));

        let relabelled = node(
            "u1",
            "3",
            json!({"nvidia.com/gpu.present": "true", "x": "2"}),
            None,
        );
        assert!(NodeMeta::labels_changed(&base, &relabelled));
        assert!(
            !NodeMeta::report_changed(&base, &relabelled),
            "the summary reads no other label than GPU presence"
        );
        let recreated = node("u2", "4", gpu.clone(), None);
        assert!(NodeMeta::labels_changed(&base, &recreated));

        let reported = node("u1", "5", gpu, Some("driver=ok"));
        assert!(NodeMeta::report_changed(&base, &reported));
        assert!(!NodeMeta::labels_changed(&base, &reported));
        let no_gpu = node("u1", "6", json!({"x": "1"}), None);
        assert!(NodeMeta::report_changed(&base, &no_gpu));
    }
}
