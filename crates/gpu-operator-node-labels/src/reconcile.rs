//! The node-labelling Controller: one reconcile per node, on the shared metadata-only Node cache.
//! A reconcile reads the node's labels from the cache, computes [`label_changes`] against the
//! active ClusterPolicy and sends one JSON merge patch when (and only when) something changes.
//!
//! Triggers: a node that is new or whose labels changed (status heartbeats are filtered out), and
//! every node when the active ClusterPolicy changes as the decision reads it (another policy
//! becoming active, or a spec field [`crate::desired::policy_inputs`] names), when a GPUCluster
//! comes or goes ([`crate::resource_api`]: the DRA gates), or, while
//! NVIDIADrivers deploy the drivers, an NVIDIADriver's selection ([`crate::driver_owner`]). A node
//! whose resource API switch waits for its GPU workloads ([`crate::api_switch`]) is looked at
//! again every [`crate::api_switch::SWITCH_POLL`]: what it waits for is not cached. The patch is a
//! JSON patch that first tests the node's labels are still the cached ones, so a label someone
//! set after our read (say `paused-for-mig-change`) is never overwritten by a stale decision;
//! unlike a `resourceVersion` precondition it is not refused when only the node's status moved
//! (kubelet heartbeats), which thousands of nodes do all the time.

use std::{
    collections::BTreeMap,
    future::{self, Future},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use futures::StreamExt as _;
use gpu_operator_core::{
    Context, Error,
    cache::{
        node_meta::{Labels, NodeMeta},
        stores::Subscriptions,
    },
    pipeline::active,
};
use json_patch::{
    AddOperation, PatchOperation, RemoveOperation, TestOperation, jsonptr::PointerBuf,
};
use k8s_openapi::api::core::v1::Node;
use kube::{
    Api, ResourceExt as _,
    api::{Patch, PatchParams},
    runtime::{
        Controller,
        controller::{self, Action},
        reflector::ObjectRef,
    },
};
use serde_json::json;

use gpu_operator_api::labels;

use crate::{
    api_switch::{self, Step},
    api_switch_reads::{self, SwitchReads, SwitchWaits},
    desired::{LabelChanges, decide_as, decide_served},
    driver_owner,
    layout_events::{self, LayoutEvents},
    mig_recovery,
    mig_watchdog::{self, MigWatch},
    own_writes::{self, OwnWrites},
    resource_api::{self, Served},
    triggers::ActivePolicyFilter,
    workload_events::{self, WorkloadEvents},
};

/// Reconciler name: metric label and field manager suffix.
pub const NAME: &str = "node-labels";
/// Field manager of our label patches.
pub const FIELD_MANAGER: &str = "gpu-operator/node-labels";
/// Safety resync of a labelled node; costs no request when nothing changed.
const RESYNC: Duration = Duration::from_secs(3600);
/// Retry delay after an API error.
const RETRY: Duration = Duration::from_secs(10);
/// Retry delay after the node's labels changed between our read and our patch.
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
    /// The MIG layout waits already said on their nodes.
    layout_events: LayoutEvents,
    /// The invalid workload config labels already said on their nodes.
    workload_events: WorkloadEvents,
    /// The invalid resource API labels already said on their nodes (same bookkeeping).
    resource_api_events: WorkloadEvents,
    /// The MIG watchdog's memory of nodes whose reconfiguration is not done.
    mig_watch: MigWatch,
    /// The reads of nodes whose resource API switch is pending.
    switch_reads: SwitchReads,
    /// The holders of waiting switches already said on their nodes.
    switch_waits: SwitchWaits,
    patches: AtomicU64,
}

/// Runs the node-labelling Controller until `shutdown` completes. The caches behind `ctx.stores`
/// must be driven (see [`gpu_operator_core::cache::stores::start`]).
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
            layout_events: LayoutEvents::default(),
            workload_events: WorkloadEvents::default(),
            resource_api_events: WorkloadEvents::default(),
            mig_watch: MigWatch::default(),
            switch_reads: SwitchReads::default(),
            switch_waits: SwitchWaits::default(),
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
        let observer = self.clone();
        // New nodes and label changes only (the event that brings our own patch's labels is
        // one); a deleted node has nothing left to label.
        let node_events = subs.node_labels.clone().filter(move |node| {
            observer.own_writes.observe(&node.name_any(), node.labels());
            future::ready(
                kube::Resource::meta(node.as_ref())
                    .deletion_timestamp
                    .is_none(),
            )
        });
        let mut policy_filter = ActivePolicyFilter::new(self.ctx.stores.policies.clone())
            .with_drivers(self.ctx.stores.nvidia_drivers.clone())
            .with_gpu_clusters(self.ctx.stores.gpu_clusters.clone());
        let policy_changes = futures::stream::select(
            futures::stream::select(
                subs.policies.clone().map(|_| ()),
                subs.nvidia_drivers.clone().map(|_| ()),
            ),
            subs.gpu_clusters.clone().map(|_| ()),
        )
        .filter_map(move |()| future::ready(policy_filter.changed().then_some(())));
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

    async fn label(&self, node: &NodeMeta) -> Result<Action, Error> {
        let policy = active::active(&self.ctx.stores.policies.state());
        // Any GPUCluster, also one being deleted (see `resource_api`).
        let gpu_cluster = !self.ctx.stores.gpu_clusters.state().is_empty();
        let served = Served {
            policy: policy.is_some(),
            gpu_cluster,
        };
        let name = node.name_any();
        let labels = node.labels().to_map();
        let invalid = resource_api::invalid_value(&labels, served);
        if self.resource_api_events.first_seen(&name, invalid)
            && let Some(value) = invalid
        {
            resource_api::publish(&self.ctx, &name, value).await;
        }
        let Some(policy) = policy else {
            return if gpu_cluster {
                self.label_for_gpu_cluster(node, &labels).await
            } else {
                Ok(Action::await_change())
            };
        };
        let version = node.resource_version();
        if self.own_writes.awaiting(&name, Instant::now()) {
            // The watch event of our last patch is on its way and will trigger a reconcile.
            return Ok(Action::requeue(own_writes::EXPIRES_AFTER));
        }
        let (decision, switch_wait) = self.decide(&name, &labels, &policy.spec, served).await;
        let wait = decision.layout_wait.as_ref();
        if self.layout_events.first_seen(&name, wait)
            && let Some(wait) = wait
        {
            layout_events::publish(&self.ctx, &policy.spec, &name, wait).await;
        }
        let invalid = workload_events::invalid_value(&labels, &policy.spec);
        if self.workload_events.first_seen(&name, invalid)
            && let Some(value) = invalid
        {
            workload_events::publish(&self.ctx, &policy.spec, &name, value).await;
        }
        let mut changes = decision.changes;
        let mut after = labels.clone();
        for (key, value) in &changes {
            match value {
                Some(value) => after.insert(key.clone(), value.clone()),
                None => after.remove(key),
            };
        }
        let drivers = self.ctx.stores.nvidia_drivers.state();
        if let Some(owner) = driver_owner::owner_change(&after, &policy.spec, &drivers) {
            changes.insert(labels::DRIVER_OWNER.to_owned(), owner);
        }
        let finding = self
            .mig_watch
            .observe(&name, &labels, &policy.spec, Instant::now());
        if let Some(trouble) = &finding.trouble {
            mig_recovery::act(&self.ctx, &policy.spec, &name, trouble).await;
        }
        changes.extend(mig_watchdog::label_changes(&after, &finding, &policy.spec));
        // A node whose MIG reconfiguration is in progress is looked at again at its timeout.
        let resync = finding.recheck_in.map_or(RESYNC, |d| d.min(RESYNC));
        // A node whose switch waits is looked at again at the switch's poll.
        let resync = if switch_wait {
            resync.min(api_switch::SWITCH_POLL)
        } else {
            resync
        };
        if changes.is_empty() {
            return Ok(Action::requeue(resync));
        }
        self.patch(&name, version, &labels, &changes, resync).await
    }

    /// The [`Decision`](crate::Decision) for the node `name` with `labels` under `policy`, held
    /// at its current resource API while a pending switch waits ([`api_switch`]; the node's reads
    /// happen only then), and whether it waits.
    async fn decide(
        &self,
        name: &str,
        labels: &BTreeMap<String, String>,
        policy: &gpu_operator_api::ClusterPolicySpec,
        served: Served,
    ) -> (crate::Decision, bool) {
        let Some(switch) = api_switch::pending(labels, served) else {
            self.switch_waits.forget(name);
            self.switch_reads.drop_stale(Instant::now());
            return (
                decide_served(labels, Some(policy), served.gpu_cluster),
                false,
            );
        };
        let step = match self.switch_reads.step(&self.ctx, name, switch).await {
            Ok(step) => step,
            Err(error) => {
                // The node keeps its current gates (and its other labels are still kept) until a
                // later read says the switch is free.
                tracing::warn!(node = name, %error, "resource API switch: cannot read what holds the node's GPUs; it waits");
                Step::Wait(Vec::new())
            }
        };
        let mut decision = decide_as(labels, Some(policy), api_switch::gates_api(switch, &step));
        match &step {
            Step::Switch => {
                if self.switch_waits.forget(name) {
                    api_switch_reads::publish_switched(&self.ctx, name, switch).await;
                }
            }
            Step::ReleaseOwnClaims => {
                tracing::debug!(
                    node = name,
                    "resource API switch: removing the GPUCluster's own claiming pods first"
                );
                api_switch::release_own_claims(labels, &mut decision.changes);
            }
            Step::Wait(holders) if holders.is_empty() => {}
            Step::Wait(holders) => {
                if self.switch_waits.said(name, holders) {
                    api_switch_reads::publish_waiting(&self.ctx, name, switch, holders).await;
                }
            }
        }
        (decision, step != Step::Switch)
    }

    /// Only a GPUCluster: the DRA gates of [`decide_served`], nothing of the ClusterPolicy's
    /// (no MIG watchdog, no driver owner).
    async fn label_for_gpu_cluster(
        &self,
        node: &NodeMeta,
        labels: &BTreeMap<String, String>,
    ) -> Result<Action, Error> {
        let name = node.name_any();
        if self.own_writes.awaiting(&name, Instant::now()) {
            return Ok(Action::requeue(own_writes::EXPIRES_AFTER));
        }
        let changes = decide_served(labels, None, true).changes;
        if changes.is_empty() {
            return Ok(Action::requeue(RESYNC));
        }
        self.patch(&name, node.resource_version(), labels, &changes, RESYNC)
            .await
    }

    async fn patch(
        &self,
        name: &str,
        version: Option<String>,
        cached: &BTreeMap<String, String>,
        changes: &LabelChanges,
        resync: Duration,
    ) -> Result<Action, Error> {
        let api: Api<Node> = Api::all(self.ctx.client.clone());
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PatchParams::default()
        };
        self.patches.fetch_add(1, Ordering::Relaxed);
        let patched = if let Some(ops) = label_patch(cached, changes) {
            api.patch_metadata(name, &params, &Patch::<()>::Json(ops))
                .await
        } else {
            // A node without any label: nothing to test against, so the cached version is the
            // precondition (nodes carry `kubernetes.io/hostname`; this is a corner case).
            let body = json!({"metadata": {"resourceVersion": version, "labels": changes}});
            api.patch_metadata(name, &params, &Patch::Merge(&body))
                .await
        };
        match patched {
            Ok(patched) => {
                tracing::info!(node = name, ?changes, "labelled node");
                // A no-op patch leaves the version alone and sends no watch event.
                if version.as_ref() != patched.resource_version().as_ref() {
                    let written = Labels::from(patched.metadata.labels.unwrap_or_default());
                    let nodes = &self.ctx.stores.nodes;
                    let cached = |name: &str| {
                        nodes
                            .get(&ObjectRef::new(name))
                            .map(|n| own_writes::fingerprint(n.labels()))
                    };
                    self.own_writes.record(
                        name,
                        own_writes::fingerprint(&written),
                        Instant::now(),
                        cached,
                    );
                }
                Ok(Action::requeue(resync))
            }
            Err(kube::Error::Api(status)) if labels_moved(&status) => {
                // The API's reason for a failed test is generic: name what moved, and in which
                // version (one read, only on a refusal).
                let current = api.get_metadata(name).await.ok().map(|n| n.metadata);
                let moved = current
                    .as_ref()
                    .map(|meta| moved_labels(cached, meta.labels.as_ref()));
                tracing::warn!(
                    node = name,
                    code = status.code,
                    reason = %status.reason,
                    api_message = %status.message,
                    cached_version = version.as_deref().unwrap_or_default(),
                    current_version = current.and_then(|m| m.resource_version).unwrap_or_default(),
                    ?moved,
                    "label patch refused: the node's labels differ from the cached ones; retrying from the node's current labels"
                );
                Ok(Action::requeue(CONFLICT_RETRY))
            }
            Err(kube::Error::Api(status)) if status.is_not_found() => {
                tracing::warn!(
                    node = name,
                    code = status.code,
                    reason = %status.reason,
                    message = %status.message,
                    "label patch refused: the node is gone"
                );
                Ok(Action::await_change())
            }
            Err(source) => Err(Error::kube(format!("labelling node {name}"))(source)),
        }
    }
}

/// A JSON patch that tests the node's labels are still `cached` and then sets and removes exactly
/// `changes`; `None` when the node has no labels (there is no map to test or add to).
fn label_patch(
    cached: &BTreeMap<String, String>,
    changes: &LabelChanges,
) -> Option<json_patch::Patch> {
    if cached.is_empty() {
        return None;
    }
    let label = |key: &str| PointerBuf::from_tokens(["metadata", "labels", key]);
    let test = PatchOperation::Test(TestOperation {
        path: PointerBuf::from_tokens(["metadata", "labels"]),
        value: json!(cached),
    });
    let edits = changes.iter().map(|(key, value)| match value {
        Some(value) => PatchOperation::Add(AddOperation {
            path: label(key),
            value: json!(value),
        }),
        None => PatchOperation::Remove(RemoveOperation { path: label(key) }),
    });
    Some(json_patch::Patch(
        std::iter::once(test).chain(edits).collect(),
    ))
}

/// The labels of `current` (the node as the API server has it now) that differ from `cached`,
/// as `key: cached -> current` (`-` for absent).
fn moved_labels(
    cached: &BTreeMap<String, String>,
    current: Option<&BTreeMap<String, String>>,
) -> Vec<String> {
    let empty = BTreeMap::new();
    let current = current.unwrap_or(&empty);
    let keys: std::collections::BTreeSet<&String> = cached.keys().chain(current.keys()).collect();
    keys.into_iter()
        .filter(|key| cached.get(*key) != current.get(*key))
        .map(|key| {
            let value = |map: &BTreeMap<String, String>| {
                map.get(key).map_or("-", String::as_str).to_owned()
            };
            format!("{key}: {} -> {}", value(cached), value(current))
        })
        .collect()
}

/// Whether the API server refused the patch because the node's labels (the test operation) or,
/// for the merge patch, its version no longer match the cache: a conflict, or the unprocessable
/// entity a failed JSON patch test is reported as.
fn labels_moved(status: &kube::core::Status) -> bool {
    status.is_conflict() || status.code == 422
}

#[tracing::instrument(skip_all, fields(node = %node.name_any()))]
async fn reconcile(node: Arc<NodeMeta>, labeler: Arc<NodeLabeler>) -> Result<Action, Error> {
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
fn error_policy(_node: Arc<NodeMeta>, error: &Error, _labeler: Arc<NodeLabeler>) -> Action {
    if error.is_transient() {
        Action::requeue(RETRY)
    } else {
        Action::await_change()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(labels: &[(&str, &str)]) -> serde_json::Value {
        let labels: BTreeMap<&str, &str> = labels.iter().copied().collect();
        json!({"metadata": {"name": "n", "resourceVersion": "7", "labels": labels}})
    }

    #[test]
    fn the_patch_sets_and_removes_exactly_the_changes_of_unchanged_labels() {
        let cached = BTreeMap::from([
            ("a/b".to_owned(), "1".to_owned()),
            ("nvidia.com/gpu.deploy.driver".to_owned(), "true".to_owned()),
        ]);
        let changes = LabelChanges::from([
            ("nvidia.com/gpu.present".to_owned(), Some("true".to_owned())),
            ("nvidia.com/gpu.deploy.driver".to_owned(), None),
        ]);
        let patch = label_patch(&cached, &changes).unwrap();
        let mut live = node(&[("a/b", "1"), ("nvidia.com/gpu.deploy.driver", "true")]);
        json_patch::patch(&mut live, &patch).unwrap();
        assert_eq!(
            live,
            node(&[("a/b", "1"), ("nvidia.com/gpu.present", "true")]),
            "a key with a slash is escaped; the version is not part of the patch"
        );
    }

    #[test]
    fn the_patch_fails_when_a_label_changed_since_the_read() {
        let cached = BTreeMap::from([("x".to_owned(), "1".to_owned())]);
        let changes = LabelChanges::from([(
            "nvidia.com/gpu.deploy.driver".to_owned(),
            Some("true".to_owned()),
        )]);
        let patch = label_patch(&cached, &changes).unwrap();
        let mut paused = node(&[
            ("x", "1"),
            ("nvidia.com/gpu.deploy.driver", "paused-for-mig-change"),
        ]);
        let before = paused.clone();
        assert!(json_patch::patch(&mut paused, &patch).is_err());
        assert_eq!(paused, before, "nothing is written");
        assert!(label_patch(&BTreeMap::new(), &changes).is_none());
    }

    #[test]
    fn a_refusal_names_the_labels_that_moved() {
        let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        let cached = map(&[("same", "1"), ("changed", "a"), ("gone", "x")]);
        let current = map(&[("same", "1"), ("changed", "b"), ("new", "y")]);
        assert_eq!(
            moved_labels(&cached, Some(&current)),
            ["changed: a -> b", "gone: x -> -", "new: - -> y"]
        );
        assert_eq!(moved_labels(&cached, Some(&cached)), Vec::<String>::new());
    }
}
