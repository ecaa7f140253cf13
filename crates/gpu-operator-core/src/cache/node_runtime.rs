//! A GPU node as the container-runtime cache holds it: its name, its version and
//! `status.nodeInfo.containerRuntimeVersion`, nothing else. It deserializes straight from the
//! Node watch, so the rest of a Node (conditions, images, managed fields: kilobytes each, on
//! every status heartbeat of thousands of nodes) is skipped by the parser instead of being
//! allocated and then thrown away.

use k8s_openapi::{ClusterResourceScope, api::core::v1::Node};
use kube::api::ObjectMeta;
use serde::Deserialize;

/// A GPU node's container runtime, such as `containerd://1.7.27`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(from = "Wire")]
pub struct NodeRuntime {
    metadata: ObjectMeta,
    /// `status.nodeInfo.containerRuntimeVersion`; empty when the node reports none.
    pub container_runtime_version: String,
}

impl NodeRuntime {
    /// A node named `name` running `container_runtime_version`.
    pub fn new(name: &str, container_runtime_version: &str) -> Self {
        Self {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            container_runtime_version: container_runtime_version.to_owned(),
        }
    }

    /// Whether `new` runs another container runtime than `old` (what wakes the operands).
    pub fn runtime_changed(old: &Self, new: &Self) -> bool {
        old.container_runtime_version != new.container_runtime_version
    }
}

crate::projection!(NodeRuntime, Node, ClusterResourceScope);

/// The parts of a Node's JSON that are read; serde skips every other field.
#[derive(Deserialize)]
struct Wire {
    #[serde(default)]
    metadata: WireMeta,
    #[serde(default)]
    status: WireStatus,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireMeta {
    name: Option<String>,
    resource_version: Option<String>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireStatus {
    #[serde(default)]
    node_info: WireNodeInfo,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireNodeInfo {
    #[serde(default)]
    container_runtime_version: String,
}

impl From<Wire> for NodeRuntime {
    fn from(wire: Wire) -> Self {
        Self {
            metadata: ObjectMeta {
                name: wire.metadata.name,
                resource_version: wire.metadata.resource_version,
                ..ObjectMeta::default()
            },
            container_runtime_version: wire.status.node_info.container_runtime_version,
        }
    }
}

#[cfg(test)]
mod tests {
    use kube::{Resource as _, ResourceExt as _};
    use serde_json::json;

    use super::*;

    #[test]
    fn only_the_name_version_and_runtime_of_a_node_are_kept() {
        let node = json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": "gpu-1",
                "resourceVersion": "42",
                "labels": {"nvidia.com/gpu.present": "true"},
                "managedFields": [{"manager": "kubelet", "fieldsV1": {"f:status": {}}}]
            },
            "status": {
                "images": [{"names": ["nvcr.io/nvidia/driver:595"], "sizeBytes": 1}],
                "nodeInfo": {"containerRuntimeVersion": "containerd://1.7.27", "kernelVersion": "6.8"}
            }
        });
        let cached: NodeRuntime = serde_json::from_value(node).unwrap();
        assert_eq!(cached.name_any(), "gpu-1");
        assert_eq!(cached.resource_version().as_deref(), Some("42"));
        assert!(cached.labels().is_empty() && cached.managed_fields().is_empty());
        assert_eq!(cached.container_runtime_version, "containerd://1.7.27");
        let bare: NodeRuntime = serde_json::from_value(json!({"metadata": {"name": "n"}})).unwrap();
        assert_eq!(bare, NodeRuntime::new("n", ""));
        assert_eq!(NodeRuntime::plural(&()), "nodes");
    }
}
