//! The agent's decisions, pure: whether NFD is there (then the agent stays out of the way), which
//! labels of the node it owns, and whether a write is needed at all.
//!
//! Ownership comes from the node's managed fields: the agent writes with server-side apply under
//! its own field manager, so the API server records exactly which labels it set. Applying a
//! smaller set releases only those; a label that another writer also set (NFD, `kubectl label`,
//! another controller) stays, because the API server removes a field only when its last owner lets
//! go of it.

use std::collections::{BTreeMap, BTreeSet};

use gpu_operator_api::labels::NFD_PREFIX;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;

use super::facts::AGENT_LABELS;

/// The agent's field manager.
pub const FIELD_MANAGER: &str = "gpu-operator-node-discovery";
/// The API group of NFD's CRDs (NodeFeature, NodeFeatureRule, NodeFeatureGroup).
pub const NFD_API_GROUP: &str = "nfd.k8s-sigs.io";
/// Prefix of the annotations NFD's master writes on every node it labels.
pub const NFD_ANNOTATION_PREFIX: &str = "nfd.node.kubernetes.io/";

/// What the agent does on one pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// NFD runs in the cluster: write nothing. The reason says how it was recognised.
    NfdPresent(String),
    /// The node already has every label and the agent owns no stale one: no request.
    UpToDate,
    /// Apply these labels (the agent's whole set; labels it owned and are not here are released).
    Apply(BTreeMap<String, String>),
}

/// How NFD shows itself, in the order checked: its API group is served (its CRDs are
/// installed), the node carries NFD master's annotations, or the node carries a
/// `feature.node.kubernetes.io/` label this agent never writes (NFD writes dozens: CPU, kernel
/// config, memory, …).
pub fn nfd_sign(
    nfd_api_served: bool,
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
) -> Option<String> {
    if nfd_api_served {
        return Some(format!(
            "the API server serves {NFD_API_GROUP} (NFD's CRDs are installed)"
        ));
    }
    if let Some(key) = annotations
        .keys()
        .find(|k| k.starts_with(NFD_ANNOTATION_PREFIX))
    {
        return Some(format!("the node carries NFD's annotation {key}"));
    }
    labels
        .keys()
        .find(|k| k.starts_with(NFD_PREFIX) && !AGENT_LABELS.contains(&k.as_str()))
        .map(|key| format!("the node carries the NFD label {key}, which this agent never writes"))
}

/// The labels `manager` owns through server-side apply, from the node's managed fields.
pub fn owned_labels(entries: &[ManagedFieldsEntry], manager: &str) -> BTreeSet<String> {
    entries
        .iter()
        .filter(|e| {
            e.manager.as_deref() == Some(manager) && e.operation.as_deref() == Some("Apply")
        })
        .filter_map(|e| e.fields_v1.as_ref())
        .filter_map(|f| f.0.get("f:metadata")?.get("f:labels")?.as_object())
        .flat_map(|labels| labels.keys())
        .filter_map(|k| k.strip_prefix("f:"))
        .map(str::to_owned)
        .collect()
}

/// The plan for one pass: `desired` from the host facts, against the node's `labels` and the
/// labels the agent already `owned`. A write happens only when a label is missing or has another
/// value, or when the agent owns a label the facts no longer give; a label that already has the
/// right value (whoever set it) costs nothing.
pub fn plan(
    nfd: Option<String>,
    labels: &BTreeMap<String, String>,
    owned: &BTreeSet<String>,
    desired: BTreeMap<String, String>,
) -> Plan {
    if let Some(reason) = nfd {
        return Plan::NfdPresent(reason);
    }
    let missing = desired.iter().any(|(k, v)| labels.get(k) != Some(v));
    let stale = owned.iter().any(|k| !desired.contains_key(k));
    if missing || stale {
        Plan::Apply(desired)
    } else {
        Plan::UpToDate
    }
}

#[cfg(test)]
mod tests;
