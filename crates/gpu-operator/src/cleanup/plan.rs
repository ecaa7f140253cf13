//! What the uninstall cleanup takes off one node, pure: a [`Node`] (labels, annotations,
//! managed fields, cordon, conditions) in, a [`NodeCleanup`] and its patches out.
//!
//! A key is the operator's when
//! - the node's managed fields record it under one of our field managers (`gpu-operator/…`: the
//!   node labeller, the driver upgrade, the validator; `gpu-operator-node-discovery`: the
//!   discovery agent) and under no other: a value a person or another component set or changed
//!   (`kubectl label … nvidia.com/gpu.deploy.driver=false`, a user's `nvidia.com/mig.config`)
//!   moved the key to their manager and stays;
//! - or it is one of the driver upgrade's, the MIG watchdog's and the validator's own keys, by name (writes of
//!   releases carried no field manager; NVIDIA's operator writes the same upgrade keys);
//! - or it is a `nvidia.com/gpu.deploy.*` label paused by an operand (`paused-for-mig-change`,
//!   `paused-for-driver-upgrade`): only the operator's operands write those values.
//!
//! The upgrade's cordon is lifted when the node is mid-upgrade (or failed) and was not cordoned
//! before the upgrade. Taints are left alone: the operator adds none (the startup taint
//! `nvidia.com/gpu.not-ready` is the node's own, lifted by the validator).

use std::collections::BTreeSet;

use gpu_operator_api::{conditions::node, labels, node_validation};
use gpu_operator_driver_upgrade::state::{FAILURE_REASON, RESTART_POD, STATE_SINCE, UpgradeState};
use k8s_openapi::{api::core::v1::Node, apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry};
use serde_json::{Map, Value, json};

/// Prefix of the field managers of the operator's reconcilers and agents.
pub const OUR_MANAGER_PREFIX: &str = "gpu-operator/";
/// The discovery agent's field manager (named before the `gpu-operator/` convention).
pub const DISCOVERY_MANAGER: &str = "gpu-operator-node-discovery";

/// Node labels that are the operator's by name.
const LABELS_BY_NAME: [&str; 2] = [labels::DRIVER_UPGRADE_STATE, labels::MIG_STUCK];
/// Node annotations that are the operator's by name. Not the user's requests
/// (`nvidia.com/gpu-driver-upgrade-requested`, the skip label): those stay.
const ANNOTATIONS_BY_NAME: [&str; 6] = [
    labels::DRIVER_UPGRADE_ENABLED,
    labels::DRIVER_UPGRADE_INITIAL_UNSCHEDULABLE,
    STATE_SINCE,
    FAILURE_REASON,
    RESTART_POD,
    node_validation::ANNOTATION,
];
/// Prefix of the values operands give a `gpu.deploy.*` label to pause it.
const PAUSED_PREFIX: &str = "paused-for-";

/// What the cleanup removes from one node.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct NodeCleanup {
    /// Label keys to remove.
    pub labels: BTreeSet<String>,
    /// Annotation keys to remove.
    pub annotations: BTreeSet<String>,
    /// Node condition types to remove (the validator's).
    pub conditions: BTreeSet<String>,
    /// Whether to lift the driver upgrade's cordon.
    pub uncordon: bool,
}

impl NodeCleanup {
    /// Whether nothing is to be removed.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
            && self.annotations.is_empty()
            && self.conditions.is_empty()
            && !self.uncordon
    }

    /// The JSON merge patch of the node (labels, annotations, cordon); `None` when it has none.
    pub fn node_patch(&self) -> Option<Value> {
        let nulls = |keys: &BTreeSet<String>| -> Map<String, Value> {
            keys.iter().map(|k| (k.clone(), Value::Null)).collect()
        };
        let mut metadata = Map::new();
        if !self.labels.is_empty() {
            metadata.insert("labels".into(), Value::Object(nulls(&self.labels)));
        }
        if !self.annotations.is_empty() {
            metadata.insert(
                "annotations".into(),
                Value::Object(nulls(&self.annotations)),
            );
        }
        let mut patch = Map::new();
        if !metadata.is_empty() {
            patch.insert("metadata".into(), Value::Object(metadata));
        }
        if self.uncordon {
            patch.insert("spec".into(), json!({"unschedulable": null}));
        }
        (!patch.is_empty()).then_some(Value::Object(patch))
    }

    /// The strategic merge patch of `nodes/status` deleting our conditions; `None` when none.
    pub fn status_patch(&self) -> Option<Value> {
        (!self.conditions.is_empty()).then(|| {
            let deletes: Vec<Value> = self
                .conditions
                .iter()
                .map(|t| json!({"type": t, "$patch": "delete"}))
                .collect();
            json!({"status": {"conditions": deletes}})
        })
    }

    /// One line for the hook's log: what was removed.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        for (what, keys) in [
            ("labels", &self.labels),
            ("annotations", &self.annotations),
            ("conditions", &self.conditions),
        ] {
            if !keys.is_empty() {
                let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
                parts.push(format!("{what} {}", keys.join(", ")));
            }
        }
        if self.uncordon {
            parts.push("the driver upgrade's cordon".to_owned());
        }
        parts.join("; ")
    }
}

/// Whether `manager` is one of the operator's field managers.
pub fn is_ours(manager: &str) -> bool {
    manager.starts_with(OUR_MANAGER_PREFIX) || manager == DISCOVERY_MANAGER
}

/// What to remove from `node`.
pub fn node_cleanup(node: &Node) -> NodeCleanup {
    let meta = &node.metadata;
    let present_labels = meta.labels.clone().unwrap_or_default();
    let present_annotations = meta.annotations.clone().unwrap_or_default();
    let managed = meta.managed_fields.as_deref().unwrap_or_default();

    let mut labels = owned_only_by_us(managed, "f:labels");
    labels.extend(LABELS_BY_NAME.iter().map(|k| (*k).to_owned()));
    labels.extend(
        present_labels
            .iter()
            .filter(|(k, v)| {
                k.starts_with(labels::GPU_DEPLOY_PREFIX) && v.starts_with(PAUSED_PREFIX)
            })
            .map(|(k, _)| k.clone()),
    );
    labels.retain(|k| present_labels.contains_key(k));

    let mut annotations = owned_only_by_us(managed, "f:annotations");
    annotations.extend(ANNOTATIONS_BY_NAME.iter().map(|k| (*k).to_owned()));
    annotations.retain(|k| present_annotations.contains_key(k));

    let conditions = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .filter(|c| {
            node_validation::TYPES.contains(&c.type_.as_str())
                || node::SANDBOX_TYPES.contains(&c.type_.as_str())
                || node::GPU_HEALTH_TYPES.contains(&c.type_.as_str())
        })
        .map(|c| c.type_.clone())
        .collect();

    NodeCleanup {
        labels,
        annotations,
        conditions,
        uncordon: cordoned_by_upgrade(node),
    }
}

/// Whether the node's cordon is the driver upgrade's: the node is mid-upgrade or failed (the
/// upgrade cordons on admission and keeps a failed node cordoned), and the upgrade did not record
/// that it was cordoned before.
fn cordoned_by_upgrade(node: &Node) -> bool {
    let cordoned = node
        .spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false);
    let label = |key| node.metadata.labels.as_ref()?.get(key).map(String::as_str);
    let annotation = |key| {
        node.metadata
            .annotations
            .as_ref()?
            .get(key)
            .map(String::as_str)
    };
    let upgrading = label(labels::DRIVER_UPGRADE_STATE)
        .and_then(UpgradeState::parse)
        .is_some_and(|s| s.in_progress() || s == UpgradeState::Failed);
    let cordoned_before = annotation(labels::DRIVER_UPGRADE_INITIAL_UNSCHEDULABLE) == Some("true");
    cordoned && upgrading && !cordoned_before
}

/// The keys of a metadata map (`section`: `f:labels` or `f:annotations`) that our field managers
/// own and no other manager does.
fn owned_only_by_us(managed: &[ManagedFieldsEntry], section: &str) -> BTreeSet<String> {
    let (mut ours, mut others) = (BTreeSet::new(), BTreeSet::new());
    for entry in managed {
        let keys = keys_in(entry, section);
        if entry.manager.as_deref().is_some_and(is_ours) {
            ours.extend(keys);
        } else {
            others.extend(keys);
        }
    }
    ours.retain(|k| !others.contains(k));
    ours
}

/// The keys under `f:metadata` → `section` of a managed-fields entry.
fn keys_in(entry: &ManagedFieldsEntry, section: &str) -> Vec<String> {
    entry
        .fields_v1
        .as_ref()
        .and_then(|fields| fields.0.get("f:metadata")?.get(section)?.as_object())
        .map(|keys| {
            keys.keys()
                .filter_map(|key| key.strip_prefix("f:").map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
