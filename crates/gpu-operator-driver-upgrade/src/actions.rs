//! The requests a step makes: evictions through the Eviction API, the list of a node's pods, the
//! node's merge patch, the release of every node when upgrades are off, and the node Events.

use gpu_operator_api::labels;
use gpu_operator_core::{Context, Error};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::{
    Api,
    api::{EvictParams, ListParams, Patch, PatchParams},
    runtime::events::{Event, EventType},
};
use serde_json::{Map, Value, json};

use crate::{
    facts::{NodeFacts, Workload},
    plan::{self, StateLabel, Step},
    workload_pod::WorkloadPod,
};

/// Field manager of the node patches (state label, annotations, cordon), so the uninstall cleanup
/// finds what the upgrade wrote by its owner.
pub const FIELD_MANAGER: &str = "gpu-operator/driver-upgrade";

/// The patch parameters of every node patch.
pub fn node_patch_params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    }
}

/// How long one eviction may take before it counts as refused for now.
const EVICTION_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Evicts `namespace/name`; `Some(why)` when a PodDisruptionBudget (or the API) refuses it now.
pub async fn evict(ctx: &Context, namespace: &str, name: &str) -> Result<Option<String>, Error> {
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), namespace);
    // The API server answers a disruption budget's refusal with 429, which the client retries
    // with backoff (honouring Retry-After) for minutes: a refusal is taken as such after a while,
    // and the node looks again on its next pass.
    let Ok(result) =
        tokio::time::timeout(EVICTION_WAIT, pods.evict(name, &EvictParams::default())).await
    else {
        return Ok(Some(format!(
            "a PodDisruptionBudget blocks the eviction of pod {namespace}/{name} (the API server \
             keeps answering 429 Too Many Requests)"
        )));
    };
    match result {
        Ok(_) => Ok(None),
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(None),
        Err(kube::Error::Api(response)) if response.code == 429 => Ok(Some(format!(
            "a PodDisruptionBudget blocks the eviction of pod {namespace}/{name} ({})",
            response.message
        ))),
        Err(kube::Error::Api(response))
            if response.code == 500 && response.message.contains("disruption budget") =>
        {
            Ok(Some(format!(
                "pod {namespace}/{name} cannot be evicted: {}",
                response.message
            )))
        }
        Err(e) => Err(Error::kube(format!("evicting pod {namespace}/{name}"))(e)),
    }
}

/// The pods on node `node`, from a list filtered by the API server.
pub async fn pods_on(ctx: &Context, node: &str) -> Result<Vec<Workload>, Error> {
    let pods: Api<WorkloadPod> = Api::all(ctx.client.clone());
    let list = pods
        .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
        .await
        .map_err(Error::kube(format!("listing the pods on node {node}")))?;
    Ok(list.items.into_iter().map(|p| p.workload).collect())
}

/// The JSON merge patch of `step`, `None` when it changes nothing on the node.
pub fn patch_json(step: &Step) -> Option<Value> {
    let p = &step.patch;
    let mut metadata = Map::new();
    let mut node_labels = Map::new();
    match p.state {
        StateLabel::Keep => {}
        StateLabel::Set(s) => {
            node_labels.insert(labels::DRIVER_UPGRADE_STATE.into(), s.as_str().into());
        }
        StateLabel::Remove => {
            node_labels.insert(labels::DRIVER_UPGRADE_STATE.into(), Value::Null);
        }
    }
    if let Some(client) = p.client {
        node_labels.insert(labels::DEPLOY_CLIENT.into(), client.into());
    }
    if !node_labels.is_empty() {
        metadata.insert("labels".into(), Value::Object(node_labels));
    }
    if !p.annotations.is_empty() {
        let annotations: Map<String, Value> = p
            .annotations
            .iter()
            .map(|(k, v)| {
                (
                    (*k).to_owned(),
                    v.clone().map_or(Value::Null, Value::String),
                )
            })
            .collect();
        metadata.insert("annotations".into(), Value::Object(annotations));
    }
    let mut patch = Map::new();
    if !metadata.is_empty() {
        patch.insert("metadata".into(), Value::Object(metadata));
    }
    if let Some(unschedulable) = p.unschedulable {
        patch.insert(
            "spec".into(),
            json!({ "unschedulable": if unschedulable { Value::Bool(true) } else { Value::Null } }),
        );
    }
    (!patch.is_empty()).then_some(Value::Object(patch))
}

/// Hands every node back: no state label, none of our annotations.
pub async fn release(ctx: &Context, nodes: &[NodeFacts]) -> Result<(), Error> {
    let api: Api<Node> = Api::all(ctx.client.clone());
    for node in nodes {
        let Some(patch) = plan::release(node) else {
            continue;
        };
        let step = Step {
            patch,
            ..Step::default()
        };
        if let Some(json) = patch_json(&step) {
            api.patch(&node.name, &node_patch_params(), &Patch::Merge(&json))
                .await
                .map_err(Error::kube(format!(
                    "removing the driver upgrade state of node {}",
                    node.name
                )))?;
        }
    }
    Ok(())
}

/// Publishes `event` about node `node`.
pub async fn publish(ctx: &Context, node: &str, event: &plan::NodeEvent) {
    let event = Event {
        type_: if event.warning {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: event.reason.to_owned(),
        note: Some(event.note.clone()),
        action: "DriverUpgrade".to_owned(),
        secondary: None,
    };
    ctx.one_off_events.publish_on_node(node, &event).await;
}
