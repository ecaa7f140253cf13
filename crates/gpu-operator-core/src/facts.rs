//! Facts about the cluster's nodes the reconcilers need, computed from the metadata-only Node
//! cache: how many GPU nodes there are, whether NFD runs, and which nodes an operand targets.

use std::collections::BTreeMap;

use gpu_operator_api::labels;
use k8s_openapi::api::core::v1::Node;
use kube::{ResourceExt as _, core::PartialObjectMeta};

/// What the node cache says about the cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterFacts {
    /// Nodes labelled `nvidia.com/gpu.present=true`.
    pub gpu_nodes: usize,
    /// Whether any node carries an NFD label.
    pub has_nfd_labels: bool,
}

impl ClusterFacts {
    /// Computes the facts from node metadata.
    pub fn from_nodes<'a>(nodes: impl IntoIterator<Item = &'a PartialObjectMeta<Node>>) -> Self {
        let mut facts = Self::default();
        for node in nodes {
            let node_labels = node.labels();
            if node_labels
                .get(labels::GPU_PRESENT)
                .is_some_and(|v| v == "true")
            {
                facts.gpu_nodes += 1;
            }
            if !facts.has_nfd_labels
                && node_labels
                    .keys()
                    .any(|k| k.starts_with(labels::NFD_PREFIX))
            {
                facts.has_nfd_labels = true;
            }
        }
        facts
    }
}

/// Whether `node_labels` satisfy every `key=value` of a DaemonSet's `nodeSelector`.
pub fn matches_selector(
    node_labels: &BTreeMap<String, String>,
    selector: &BTreeMap<String, String>,
) -> bool {
    selector.iter().all(|(k, v)| node_labels.get(k) == Some(v))
}
