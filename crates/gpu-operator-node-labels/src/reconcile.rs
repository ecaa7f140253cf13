//! The node-labelling Controller: one reconcile per node, on the shared metadata-only Node cache.
//! A reconcile reads the node's labels from the cache, computes [`label_changes`] against the
//! active ClusterPolicy and sends one JSON merge patch when (and only when) something changes.
//!
//! Triggers: a node that is new or whose labels changed (status heartbeats are filtered out), and
//! every node when the active ClusterPolicy changes (a spec change, or another policy becoming
//! active). The patch carries the cached `resourceVersion` as a precondition, so a label someone
//! set after our read (say `paused-for-mig-change`) is never overwritten by a stale decision.

use std::{
    future::{self, Future},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use futures::StreamExt as _;
use gpu_operator_core::{Context, Error, active, stores::Subscriptions};
use k8s_openapi::api::core::v1::Node;
use kube::{
    Api, ResourceExt as _,
    api::{Patch, PatchParams},
    core::PartialObjectMeta,
    runtime::{
        Controller,
        controller::{self, Action},
        reflector::ObjectRef,
    },
};
use serde_json::{Value, json};

use crate::{
    desired::{LabelChanges, label_changes},
    own_writes::OwnWrites,
    triggers::{ActivePolicyFilter, NodeLabelFilter},
};

/// Reconciler name: metric label and field manager suffix.
pub const NAME: &str = "node-labels";
/// Field manager of our label patches.
pub const FIELD_MANAGER: &str = "gpu-operator/node-labels";
/// Safety resync of a labelled node; costs no request when nothing changed.
const RESYNC: Duration = Duration::from_secs(3600);
/// Retry delay after an API error.
const RETRY: Duration = Duration::from_secs(10);
/// Retry delay after the node changed between our read and our patch.
const CONFLICT_RETRY: Duration = Duration::from_secs(1);
/// Node reconciles (so patches) in flight at once. A ClusterPolicy change reconciles every node:
/// unbounded, thousands of requests (and connections) would hit the API server at once, starve
/// the leader-election renewals and bloat the operator with connection buffers.
const CONCURRENCY: u16 = 8;

/// The node-labelling reconciler: the shared context plus what it remembers between reconciles.
pub struct NodeLabeler {
    ctx: Arc<Context>,
    /// Our patches the cache has not shown yet.
    own_writes: OwnWrites,
    patches: AtomicU64,
}

/// Runs the node-labelling Controller until `shutdown` completes. The caches behind `ctx.stores`
/// must be driven (see [`gpu_operator_core::stores::start`]).
pub fn controller(
    ctx: Arc<Context>,
    subs: &Subscriptions,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> impl Future<Output = ()> + Send + 'static {
    NodeLabeler::new(ctx).run(subs, shutdown)
}

impl NodeLabeler {
    /// A reconciler on `ctx`.
    pub fn new(ctx: Arc<Context>) -> Arc<Self> {
        Arc::new(Self {
            ctx,
            own_writes: OwnWrites::default(),
            patches: AtomicU64::new(0),
        })
    }

    /// Patch requests sent so far (each labels one node).
    pub fn patches(&self) -> u64 {
        self.patches.load(Ordering::Relaxed)
    }

    /// The Controller, as a future that ends after `shutdown` once running reconciles finish.
    pub fn run(
        self: Arc<Self>,
        subs: &Subscriptions,
        shutdown: impl Future<Output = ()> + Send + Sync + 'static,
    ) -> impl Future<Output = ()> + Send + 'static {
        let nodes = self.ctx.stores.nodes.clone();
        let mut node_filter = NodeLabelFilter::new(nodes.clone());
        let node_events = subs
            .nodes
            .clone()
            .filter(move |node| future::ready(node_filter.changed(node)));
        let mut policy_filter = ActivePolicyFilter::new(self.ctx.stores.policies.clone());
        let policy_changes = subs
            .policies
            .clone()
            .filter_map(move |_| future::ready(policy_filter.changed().then_some(())));
        Controller::for_shared_stream(node_events, nodes)
            .with_config(controller::Config::default().concurrency(CONCURRENCY))
            .reconcile_all_on(policy_changes)
            .graceful_shutdown_on(shutdown)
            .run(reconcile, error_policy, self)
            .for_each(|result| {
                if let Err(error) = result {
                    tracing::warn!(reconciler = NAME, error = %error, "node labelling failed");
                }
                future::ready(())
            })
    }

    async fn label(&self, node: &PartialObjectMeta<Node>) -> Result<Action, Error> {
        let Some(policy) = active::active(&self.ctx.stores.policies.state()) else {
            return Ok(Action::await_change());
        };
        let name = node.name_any();
        let version = node.resource_version();
        if self.own_writes.awaiting(&name, version.as_deref()) {
            // The watch event of our last patch is on its way and will trigger a reconcile.
            return Ok(Action::await_change());
        }
        let changes = label_changes(node.labels(), &policy.spec);
        if changes.is_empty() {
            return Ok(Action::requeue(RESYNC));
        }
        self.patch(&name, version, &changes).await
    }

    async fn patch(
        &self,
        name: &str,
        version: Option<String>,
        changes: &LabelChanges,
    ) -> Result<Action, Error> {
        let api: Api<Node> = Api::all(self.ctx.client.clone());
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PatchParams::default()
        };
        let body = patch_body(version.as_deref(), changes);
        self.patches.fetch_add(1, Ordering::Relaxed);
        match api
            .patch_metadata(name, &params, &Patch::Merge(&body))
            .await
        {
            Ok(patched) => {
                tracing::info!(node = name, ?changes, "labelled node");
                // A no-op patch leaves the version alone and sends no watch event.
                if let Some(version) =
                    version.filter(|v| patched.resource_version().as_ref() != Some(v))
                {
                    let nodes = &self.ctx.stores.nodes;
                    let exists = |name: &str| nodes.get(&ObjectRef::new(name)).is_some();
                    self.own_writes.record(name, version, exists);
                }
                Ok(Action::requeue(RESYNC))
            }
            Err(kube::Error::Api(status)) if status.is_conflict() => {
                tracing::debug!(node = name, "node changed since it was cached; retrying");
                Ok(Action::requeue(CONFLICT_RETRY))
            }
            Err(kube::Error::Api(status)) if status.is_not_found() => Ok(Action::await_change()),
            Err(source) => Err(Error::kube(format!("labelling node {name}"))(source)),
        }
    }
}

/// `{"metadata":{"resourceVersion": …, "labels":{key: value or null}}}`: a JSON merge patch
/// that sets and removes exactly `changes`, and fails with a conflict if the node changed since
/// `version`.
fn patch_body(version: Option<&str>, changes: &LabelChanges) -> Value {
    let mut metadata = json!({ "labels": changes });
    if let Some(version) = version {
        metadata["resourceVersion"] = json!(version);
    }
    json!({ "metadata": metadata })
}

#[tracing::instrument(skip_all, fields(node = %node.name_any()))]
async fn reconcile(
    node: Arc<PartialObjectMeta<Node>>,
    labeler: Arc<NodeLabeler>,
) -> Result<Action, Error> {
    let started = Instant::now();
    let result = labeler.label(&node).await;
    let category = result.as_ref().err().map(Error::category);
    labeler
        .ctx
        .metrics
        .observe(NAME, started.elapsed(), category);
    result
}

/// API errors retry after a delay; anything else waits for the node or the policy to change.
fn error_policy(
    _node: Arc<PartialObjectMeta<Node>>,
    error: &Error,
    _labeler: Arc<NodeLabeler>,
) -> Action {
    if error.is_transient() {
        Action::requeue(RETRY)
    } else {
        Action::await_change()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_patch_sets_removes_and_carries_the_version_precondition() {
        let changes = LabelChanges::from([
            ("nvidia.com/gpu.present".to_owned(), Some("true".to_owned())),
            ("nvidia.com/gpu.deploy.driver".to_owned(), None),
        ]);
        assert_eq!(
            patch_body(Some("42"), &changes),
            json!({"metadata": {
                "resourceVersion": "42",
                "labels": {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.deploy.driver": null}
            }})
        );
        assert_eq!(
            patch_body(None, &changes)["metadata"]
                .as_object()
                .map(|m| m.contains_key("resourceVersion")),
            Some(false)
        );
    }
}
