//! `gpu-operator cleanup-node-labels`: removes the node labels the operator wrote, for the chart's
//! `operator.cleanupNodeLabels` uninstall hook. A label counts as the operator's when the Node's
//! managed fields record it under the node labeller's field manager, so labels a person or another
//! component set (`nvidia.com/gpu.deploy.driver=false`, GFD's labels) stay.

use std::{collections::BTreeSet, path::Path};

use anyhow::Context as _;
use k8s_openapi::{api::core::v1::Node, apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry};
use kube::{
    Api, ResourceExt as _,
    api::{ListParams, Patch, PatchParams},
    core::PartialObjectMeta,
};
use serde_json::{Map, Value, json};

/// The node labeller's field manager (`gpu-operator/node-labels`).
const LABELLER: &str = gpu_operator_node_labels::reconcile::FIELD_MANAGER;
/// Field manager of the cleanup patches.
const FIELD_MANAGER: &str = "gpu-operator/cleanup";
/// Nodes per list page.
const PAGE: u32 = 500;

/// Removes the operator's labels from every node; prints what it did.
pub fn main(kubeconfig: Option<&Path>) -> anyhow::Result<()> {
    tokio::runtime::Runtime::new()
        .context("starting the async runtime")?
        .block_on(run(kubeconfig))
}

async fn run(kubeconfig: Option<&Path>) -> anyhow::Result<()> {
    let api: Api<Node> = Api::all(gpu_operator_process::config::client(kubeconfig).await?);
    let (mut nodes, mut cleaned) = (0_usize, 0_usize);
    let mut params = ListParams::default().limit(PAGE);
    loop {
        let page = api
            .list_metadata(&params)
            .await
            .context("listing nodes (metadata)")?;
        for node in &page.items {
            nodes += 1;
            let labels = operator_labels(node);
            if labels.is_empty() {
                continue;
            }
            remove(&api, node, &labels).await?;
            cleaned += 1;
            println!(
                "node {}: removed {}",
                node.name_any(),
                labels.iter().cloned().collect::<Vec<_>>().join(", ")
            );
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => break,
        }
    }
    println!("removed the operator's labels from {cleaned} of {nodes} nodes");
    Ok(())
}

async fn remove(
    api: &Api<Node>,
    node: &PartialObjectMeta<Node>,
    labels: &BTreeSet<String>,
) -> anyhow::Result<()> {
    let nulls: Map<String, Value> = labels.iter().map(|k| (k.clone(), Value::Null)).collect();
    let patch = json!({"metadata": {"labels": nulls}});
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    match api
        .patch_metadata(&node.name_any(), &params, &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
        Err(error) => {
            Err(error).with_context(|| format!("removing labels of node {}", node.name_any()))
        }
    }
}

/// The `nvidia.com/` labels of `node` that the node labeller's field manager owns.
fn operator_labels(node: &PartialObjectMeta<Node>) -> BTreeSet<String> {
    let present = node.labels();
    node.managed_fields()
        .iter()
        .filter(|entry| entry.manager.as_deref() == Some(LABELLER))
        .flat_map(owned_labels)
        .filter(|key| key.starts_with("nvidia.com/") && present.contains_key(key))
        .collect()
}

/// The label keys in a managed-fields entry (`f:metadata` → `f:labels` → `f:<key>`).
fn owned_labels(entry: &ManagedFieldsEntry) -> Vec<String> {
    entry
        .fields_v1
        .as_ref()
        .and_then(|fields| {
            fields
                .0
                .get("f:metadata")?
                .get("f:labels")?
                .as_object()
                .cloned()
        })
        .map(|labels| {
            labels
                .keys()
                .filter_map(|key| key.strip_prefix("f:").map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(labels: &[(&str, &str)], managers: &Value) -> PartialObjectMeta<Node> {
        serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": "n",
                "labels": labels.iter().map(|(k, v)| ((*k).to_owned(), json!(v))).collect::<Map<_, _>>(),
                "managedFields": managers,
            },
        }))
        .unwrap()
    }

    fn entry(manager: &str, keys: &[&str]) -> Value {
        let labels: Map<String, Value> =
            keys.iter().map(|k| (format!("f:{k}"), json!({}))).collect();
        json!({"manager": manager, "operation": "Update", "fieldsType": "FieldsV1",
               "fieldsV1": {"f:metadata": {"f:labels": labels}}})
    }

    #[test]
    fn only_labels_the_labeller_owns_are_removed() {
        let node = node(
            &[
                ("nvidia.com/gpu.present", "true"),
                ("nvidia.com/gpu.deploy.driver", "false"),
                ("nvidia.com/gpu.deploy.device-plugin", "true"),
                ("nvidia.com/gpu.product", "Tesla-T4"),
            ],
            &json!([
                entry(
                    LABELLER,
                    &[
                        "nvidia.com/gpu.present",
                        "nvidia.com/gpu.deploy.device-plugin",
                        "nvidia.com/gone"
                    ]
                ),
                entry("kubectl-label", &["nvidia.com/gpu.deploy.driver"]),
                entry("gpu-feature-discovery", &["nvidia.com/gpu.product"]),
            ]),
        );
        assert_eq!(
            operator_labels(&node).into_iter().collect::<Vec<_>>(),
            [
                "nvidia.com/gpu.deploy.device-plugin",
                "nvidia.com/gpu.present"
            ]
        );
    }

    #[test]
    fn a_node_without_managed_fields_keeps_everything() {
        let node = node(&[("nvidia.com/gpu.present", "true")], &json!([]));
        assert!(operator_labels(&node).is_empty());
    }
}
