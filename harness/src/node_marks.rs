//! Labels and annotations a scenario puts on simulated nodes for its duration: [`NodeMarks`]
//! remembers what each key was (or that it was absent) and puts it back when dropped, also when a
//! step panics, so later scenarios find the fleet as `cluster up` made it.

use std::collections::BTreeMap;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Node;
use kube::{
    Api,
    api::{Patch, PatchParams},
};
use serde_json::{Map, Value, json};

/// The labels and annotations to set on one node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Marks {
    /// Labels, by key.
    pub labels: BTreeMap<String, String>,
    /// Annotations, by key.
    pub annotations: BTreeMap<String, String>,
}

/// Marks set on nodes, with what they replaced; restored on drop.
pub struct NodeMarks {
    /// Per node: the merge patch that restores it.
    restore: Vec<(String, Value)>,
}

impl NodeMarks {
    /// Sets `marks` on each named node with field manager `manager` (a plain update, as an
    /// operator's client would write them).
    pub async fn set(
        client: &kube::Client,
        marks: &BTreeMap<String, Marks>,
        manager: &str,
    ) -> anyhow::Result<Self> {
        let nodes: Api<Node> = Api::all(client.clone());
        let mut guard = Self {
            restore: Vec::new(),
        };
        for (name, marks) in marks {
            let node = nodes
                .get(name)
                .await
                .with_context(|| format!("node {name}"))?;
            let labels = node.metadata.labels.unwrap_or_default();
            let annotations = node.metadata.annotations.unwrap_or_default();
            let before = |live: &BTreeMap<String, String>, keys: &BTreeMap<String, String>| {
                keys.keys()
                    .map(|k| (k.clone(), live.get(k).map_or(Value::Null, |v| json!(v))))
                    .collect::<Map<String, Value>>()
            };
            guard.restore.push((
                name.clone(),
                json!({"metadata": {
                    "labels": before(&labels, &marks.labels),
                    "annotations": before(&annotations, &marks.annotations),
                }}),
            ));
            let patch =
                json!({"metadata": {"labels": marks.labels, "annotations": marks.annotations}});
            let params = PatchParams {
                field_manager: Some(manager.to_owned()),
                ..PatchParams::default()
            };
            nodes
                .patch(name, &params, &Patch::Merge(&patch))
                .await
                .with_context(|| format!("marking node {name}"))?;
        }
        Ok(guard)
    }
}

impl Drop for NodeMarks {
    fn drop(&mut self) {
        let restore = std::mem::take(&mut self.restore);
        // Drop cannot await, and the test's runtime is blocked here: restore on a thread of its
        // own, with a runtime and a client of its own.
        let restored = std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            runtime.block_on(async move {
                let Ok(client) = crate::client().await else {
                    return;
                };
                let nodes: Api<Node> = Api::all(client);
                for (name, patch) in restore {
                    let _ = nodes
                        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await;
                }
            });
        });
        let _ = restored.join();
    }
}
