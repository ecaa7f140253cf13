//! Wiring reconcilers into kube-runtime Controllers over the shared caches: each operand and the
//! status reconciler watch ClusterPolicies, operands own every kind they render, and they are
//! woken by node label changes and GPU-node runtime changes (not by the status heartbeats of
//! thousands of nodes), by a change of the data of a user's ConfigMap in the operator namespace
//! (one the ClusterPolicy may name) and when the ServiceMonitor CRD comes or goes.

use std::{
    collections::HashMap,
    future::Future,
    hash::{DefaultHasher, Hash as _, Hasher as _},
    sync::Arc,
    time::Duration,
};

use futures::{Stream, StreamExt as _};
use gpu_operator_api::ClusterPolicy;
use k8s_openapi::api::core::v1::Node;
use kube::{
    ResourceExt as _,
    core::PartialObjectMeta,
    runtime::{
        Controller, controller,
        reflector::{ObjectRef, Store},
    },
};

use crate::{
    Context, Error, active, meta, node_validation,
    operand::{self, Operand},
    policy_status,
    stores::Subscriptions,
};

/// Quiet period that merges bursts of triggers into one reconcile.
const DEBOUNCE: Duration = Duration::from_millis(500);
/// Longer quiet period of the node summary: thousands of validators report during a rollout.
const SUMMARY_DEBOUNCE: Duration = Duration::from_secs(2);

/// Runs the reconciler of operand `O` until `shutdown` resolves.
pub fn run_operand<O: Operand>(
    ctx: Arc<Context>,
    subs: Subscriptions,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> impl Future<Output = ()> {
    let policies = ctx.stores.policies.clone();
    let runtime_policies = policies.clone();
    let crd_policies = policies.clone();
    let config_policies = policies.clone();
    let user_configs = changes(
        subs.config_maps
            .clone()
            .filter(|cm| std::future::ready(!meta::is_managed(cm.as_ref()))),
        |cm, hasher| cm.data.hash(hasher),
    );
    let runtimes = changes(subs.node_runtimes, |node, hasher| {
        node.status
            .as_ref()
            .and_then(|status| status.node_info.as_ref())
            .map(|info| &info.container_runtime_version)
            .hash(hasher);
    });
    Controller::for_shared_stream(subs.policies, policies.clone())
        .with_config(controller::Config::default().debounce(DEBOUNCE))
        .owns_shared_stream(subs.service_accounts)
        .owns_shared_stream(subs.roles)
        .owns_shared_stream(subs.role_bindings)
        .owns_shared_stream(subs.cluster_roles)
        .owns_shared_stream(subs.cluster_role_bindings)
        .owns_shared_stream(subs.config_maps)
        .owns_shared_stream(subs.services)
        .owns_shared_stream(subs.runtime_classes)
        .owns_shared_stream(subs.daemonsets)
        .watches_shared_stream(label_changes(subs.nodes), move |_| active_ref(&policies))
        .watches_shared_stream(runtimes, move |_| active_ref(&runtime_policies))
        .watches_shared_stream(user_configs, move |_| active_ref(&config_policies))
        .watches_shared_stream(subs.service_monitor_crds, move |_| {
            active_ref(&crd_policies)
        })
        .graceful_shutdown_on(shutdown)
        .run(operand::reconcile::<O>, operand::error_policy::<O>, ctx)
        .for_each(|result| log(O::NAME, result))
}

/// Runs the overall status reconciler until `shutdown` resolves; `operands` are the condition
/// types of the operand reconcilers that run.
pub fn run_status(
    ctx: Arc<Context>,
    subs: Subscriptions,
    operands: &'static [&'static str],
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> impl Future<Output = ()> {
    let policies = ctx.stores.policies.clone();
    let all = ctx.stores.policies.clone();
    Controller::for_shared_stream(subs.policies, policies)
        .with_config(controller::Config::default().debounce(DEBOUNCE))
        .watches_shared_stream(label_changes(subs.nodes), move |_| all_refs(&all))
        .graceful_shutdown_on(shutdown)
        .run(
            move |policy, ctx| policy_status::reconcile(policy, ctx, operands),
            |_, error: &Error, _| operand::retry_transient(error),
            ctx,
        )
        .for_each(|result| log(policy_status::NAME, result))
}

/// The active ClusterPolicy, as the one object a node change concerns.
fn active_ref(policies: &Store<ClusterPolicy>) -> Option<ObjectRef<ClusterPolicy>> {
    active::active(&policies.state()).map(|p| ObjectRef::from_obj(p.as_ref()))
}

fn all_refs(policies: &Store<ClusterPolicy>) -> Vec<ObjectRef<ClusterPolicy>> {
    policies
        .state()
        .iter()
        .map(|p| ObjectRef::from_obj(p.as_ref()))
        .collect()
}

/// Passes a node on only when its labels changed since it was last seen (or it is new).
pub fn label_changes<S>(nodes: S) -> impl Stream<Item = Arc<PartialObjectMeta<Node>>> + Send
where
    S: Stream<Item = Arc<PartialObjectMeta<Node>>> + Send,
{
    changes(nodes, |node, hasher| node.labels().hash(hasher))
}

/// Passes a node on only when what `fingerprint` hashes of it changed (or it is new).
fn changes<S, K>(
    nodes: S,
    fingerprint: fn(&K, &mut DefaultHasher),
) -> impl Stream<Item = Arc<K>> + Send
where
    S: Stream<Item = Arc<K>> + Send,
    K: kube::Resource + Send + Sync,
{
    let mut seen: HashMap<String, u64> = HashMap::new();
    nodes.filter(move |node| {
        let mut hasher = DefaultHasher::new();
        fingerprint(node, &mut hasher);
        let hash = hasher.finish();
        let changed = seen.insert(node.name_any(), hash) != Some(hash);
        std::future::ready(changed)
    })
}

/// Runs the summary of the validators' node reports until `shutdown` resolves. Woken by a GPU
/// node appearing or leaving and by a change of a node's validation annotation.
pub fn run_node_validation(
    ctx: Arc<Context>,
    subs: Subscriptions,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> impl Future<Output = ()> {
    let policies = ctx.stores.policies.clone();
    let reports = changes(subs.nodes, |node, hasher| {
        node.labels()
            .get(gpu_operator_api::labels::GPU_PRESENT)
            .hash(hasher);
        node.annotations()
            .get(gpu_operator_api::node_validation::ANNOTATION)
            .hash(hasher);
    });
    Controller::for_shared_stream(subs.policies, policies.clone())
        .with_config(controller::Config::default().debounce(SUMMARY_DEBOUNCE))
        .watches_shared_stream(reports, move |_| active_ref(&policies))
        .graceful_shutdown_on(shutdown)
        .run(
            node_validation::reconcile,
            |_, error: &Error, _| operand::retry_transient(error),
            ctx,
        )
        .for_each(|result| log(node_validation::NAME, result))
}

fn log<T: std::fmt::Debug, E: std::fmt::Display>(
    reconciler: &str,
    result: Result<T, E>,
) -> std::future::Ready<()> {
    match result {
        Ok(object) => tracing::debug!(reconciler, ?object, "reconciled"),
        Err(error) => tracing::warn!(reconciler, %error, "reconcile failed"),
    }
    std::future::ready(())
}
