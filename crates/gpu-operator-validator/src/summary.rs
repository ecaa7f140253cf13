//! Keeps the node's validation summary annotation in step with its validator conditions, so the
//! operator can count validated nodes from its metadata-only cache.

use std::collections::BTreeMap;

use gpu_operator_api::node_validation::{self, ANNOTATION, Entry};
use k8s_openapi::api::core::v1::{Node, NodeCondition};
use kube::{Api, api::Patch};
use serde_json::json;

use crate::node_conditions::ReportError;

/// The annotation value for `conditions` (only the validator's own types count).
pub fn value(conditions: &[NodeCondition]) -> String {
    let entries: BTreeMap<String, Entry> = conditions
        .iter()
        .filter(|c| node_validation::TYPES.contains(&c.type_.as_str()))
        .map(|c| {
            (
                c.type_.clone(),
                Entry {
                    ready: c.status == "True",
                    reason: c.reason.clone().unwrap_or_default(),
                },
            )
        })
        .collect();
    node_validation::encode(&entries)
}

/// `existing` with `changed` replacing the conditions of the same type.
pub fn merged(existing: &[NodeCondition], changed: &[NodeCondition]) -> Vec<NodeCondition> {
    let mut all: Vec<NodeCondition> = existing
        .iter()
        .filter(|c| !changed.iter().any(|n| n.type_ == c.type_))
        .cloned()
        .collect();
    all.extend(changed.iter().cloned());
    all
}

/// Writes the annotation for `conditions` unless `node` already carries that value.
pub async fn annotate(
    nodes: &Api<Node>,
    node: &Node,
    conditions: &[NodeCondition],
) -> Result<(), ReportError> {
    let wanted = value(conditions);
    let current = node
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION));
    if current == Some(&wanted) {
        return Ok(());
    }
    let name = node.metadata.name.clone().unwrap_or_default();
    let patch = json!({"metadata": {"annotations": {ANNOTATION: wanted}}});
    nodes
        .patch(
            &name,
            &crate::node_conditions::patch_params(),
            &Patch::Merge(&patch),
        )
        .await
        .map_err(ReportError::api("annotating", &name))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn condition(type_: &str, status: &str, reason: &str) -> NodeCondition {
        NodeCondition {
            type_: type_.into(),
            status: status.into(),
            reason: Some(reason.into()),
            ..NodeCondition::default()
        }
    }

    #[test]
    fn summarizes_only_validator_conditions_with_changes_applied() {
        let existing = vec![
            condition("Ready", "True", "KubeletReady"),
            condition("GPUDriverReady", "False", "DriverNotFound"),
        ];
        let changed = vec![
            condition("GPUDriverReady", "True", "DriverValidated"),
            condition("GPUStackReady", "False", "ToolkitNotReady"),
        ];
        let all = merged(&existing, &changed);
        assert_eq!(
            value(&all),
            "GPUDriverReady=True/DriverValidated,GPUStackReady=False/ToolkitNotReady"
        );
    }
}
