//! A Node as the shared node cache holds it: name, uid, version, every label, and the one
//! annotation anything here reads (the validators' report). At 5,000 nodes the cache is the
//! operator's largest structure, so labels are stored compactly: one sorted slice per node instead
//! of a `BTreeMap` (whose tree nodes cost more than the labels), with label keys and short values
//! shared between nodes (`nvidia.com/gpu.present` and `true` exist once, not once per node).
//!
//! The type shadows `ResourceExt::labels` with its own method, so reading `node.labels()` gives
//! the compact labels, never the empty map of its bare `ObjectMeta`; the report is `validation()`.

use std::{
    collections::{BTreeMap, HashSet},
    sync::{Arc, LazyLock, Mutex, PoisonError},
};

use gpu_operator_api::node_validation;
use k8s_openapi::{ClusterResourceScope, api::core::v1::Node};
use kube::{api::ObjectMeta, core::PartialObjectMeta};
use serde::{Deserialize, Serialize, Serializer, ser::SerializeMap as _};

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

    /// The node's labels.
    pub fn labels(&self) -> &Labels {
        &self.labels
    }

    /// The validators' report on the node (annotation [`node_validation::ANNOTATION`]).
    pub fn validation(&self) -> Option<&str> {
        self.validation.as_deref()
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

/// A node's labels, sorted by key. Serializes as the JSON map the API server holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Labels(Box<[(Arc<str>, Arc<str>)]>);

impl Labels {
    /// The value of label `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .binary_search_by(|(k, _)| k.as_ref().cmp(key))
            .ok()
            .map(|i| self.0[i].1.as_ref())
    }

    /// Every label, by key.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_ref(), v.as_ref()))
    }

    /// Every label key, sorted.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(k, _)| k.as_ref())
    }

    /// Whether the node has no labels.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn from_pairs(labels: &[(&str, &str)]) -> Self {
        Self::from(
            labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>(),
        )
    }

    /// The labels as the map the label rules take.
    pub fn to_map(&self) -> BTreeMap<String, String> {
        self.iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }
}

impl From<BTreeMap<String, String>> for Labels {
    fn from(labels: BTreeMap<String, String>) -> Self {
        // The map iterates in key order, so the slice is sorted for `get`'s binary search.
        Self(
            labels
                .into_iter()
                .map(|(k, v)| (shared(&k), value(v)))
                .collect(),
        )
    }
}

impl Serialize for Labels {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.iter() {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

/// Values up to this length are shared between nodes: `true`, `false`, counts, product families.
/// Longer ones (host names, product names) are often unique to a node and are kept per node, so a
/// node that leaves takes them with it.
const SHARED_VALUE_LEN: usize = 16;

/// The label keys and short values of the cached nodes; they repeat across nodes, so the set
/// stays small. Strings no node uses any more (the host name of a node that left) are dropped
/// whenever the set has doubled since the last sweep, so node churn does not grow it.
static SHARED: LazyLock<Mutex<Interner>> = LazyLock::new(Mutex::default);

/// Size below which the shared set is never swept.
const SWEEP_FROM: usize = 1024;

#[derive(Default)]
struct Interner {
    strings: HashSet<Arc<str>>,
    sweep_at: usize,
}

impl Interner {
    fn get(&mut self, text: &str) -> Arc<str> {
        if let Some(existing) = self.strings.get(text) {
            return existing.clone();
        }
        if self.strings.len() >= self.sweep_at.max(SWEEP_FROM) {
            self.strings.retain(|s| Arc::strong_count(s) > 1);
            self.sweep_at = self.strings.len() * 2;
        }
        let new: Arc<str> = Arc::from(text);
        self.strings.insert(new.clone());
        new
    }
}

fn shared(text: &str) -> Arc<str> {
    SHARED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(text)
}

fn value(text: String) -> Arc<str> {
    if text.len() <= SHARED_VALUE_LEN {
        shared(&text)
    } else {
        Arc::from(text)
    }
}

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
    fn labels_look_up_iterate_and_serialize_like_the_map_they_came_from() {
        let map: BTreeMap<String, String> =
            [("b", "2"), ("a", "1"), ("c", "a-long-host-name-0042")]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
        let labels = Labels::from(map.clone());
        assert_eq!(labels.keys().collect::<Vec<_>>(), ["a", "b", "c"]);
        for (k, v) in &map {
            assert_eq!(labels.get(k), Some(v.as_str()));
        }
        assert_eq!(labels.get("d"), None);
        assert_eq!(labels.to_map(), map);
        assert_eq!(serde_json::to_value(&labels).unwrap(), json!(map));
        assert!(Labels::default().is_empty() && !labels.is_empty());
    }

    #[test]
    fn keys_and_short_values_are_shared_between_nodes() {
        let labels = |host: &str| {
            Labels::from(BTreeMap::from([
                ("nvidia.com/gpu.present".to_owned(), "true".to_owned()),
                ("kubernetes.io/hostname".to_owned(), host.to_owned()),
            ]))
        };
        let (a, b) = (
            labels("node-a-with-a-long-name"),
            labels("node-b-with-a-long-name"),
        );
        let present = |l: &Labels| l.0[1].clone();
        assert!(Arc::ptr_eq(&present(&a).0, &present(&b).0), "one key");
        assert!(
            Arc::ptr_eq(&present(&a).1, &present(&b).1),
            "one short value"
        );
        assert!(
            !Arc::ptr_eq(&a.0[0].1, &b.0[0].1),
            "host names are the nodes' own"
        );
    }

    #[test]
    fn strings_no_node_uses_are_swept_once_the_set_has_doubled() {
        let mut interner = Interner::default();
        let kept = interner.get("kept");
        for i in 0..SWEEP_FROM * 3 {
            drop(interner.get(&format!("gone-{i}")));
        }
        assert!(
            interner.strings.len() <= SWEEP_FROM,
            "{}",
            interner.strings.len()
        );
        assert!(
            Arc::ptr_eq(&kept, &interner.get("kept")),
            "a string in use stays"
        );
    }
}
