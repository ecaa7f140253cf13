//! The kube-runtime Controllers of the status reconcilers, over the shared caches (each kind's
//! overall status also registered with the status batch, so each status request carries it): the
//! ClusterPolicy's overall status is woken by every ClusterPolicy change and node label change,
//! each NVIDIADriver's by a change of its driver condition, the GPUCluster's by a change of its
//! identity, spec, finalizers, deletion or operand conditions (and its teardown by a timer: see
//! [`crate::gpu_cluster_teardown`]), the node summary by its own condition's changes and the
//! validators' reports, the GPUCluster's DRA summary by its own condition's changes, node label
//! changes and the DRA driver's ResourceSlices.

use std::{future::Future, hash::Hash as _, sync::Arc, time::Duration};

use futures::StreamExt as _;
use gpu_operator_api::{
    ClusterPolicy, GpuCluster,
    conditions::{NODES_VALIDATED, gpu_cluster::DRA_RESOURCES_PUBLISHED, operand::DRIVER_READY},
};
use gpu_operator_core::{
    Context, Error,
    cache::stores::Subscriptions,
    pipeline::{
        coalesce::{self, BURST_PERIOD, throttle},
        controller::{changes, log, owner_changes, served},
        operand,
    },
};
use kube::{
    Resource as _,
    runtime::{
        Controller,
        reflector::{ObjectRef, Store},
    },
};

use crate::{
    dra_resources, gpu_cluster_status, node_validation, nvidia_driver_status, policy_status,
};

/// How often at most the validators' reports wake the node summary, which reads every node:
/// thousands of validators report during a rollout.
const SUMMARY_PERIOD: Duration = Duration::from_secs(2);

/// Runs the overall status reconciler until `shutdown` resolves; `operands` are the condition
/// types of the operand reconcilers that run.
pub fn run_policy_status(
    ctx: Arc<Context>,
    subs: Subscriptions,
    operands: &'static [&'static str],
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> impl Future<Output = ()> {
    ctx.status_batch
        .summarize_with(policy_status::summarizer(Arc::downgrade(&ctx), operands));
    let policies = ctx.stores.policies.clone();
    let all = ctx.stores.policies.clone();
    let nodes = throttle(subs.node_labels, BURST_PERIOD);
    Controller::for_shared_stream(subs.policies, policies)
        .with_config(coalesce::config())
        .watches_shared_stream(nodes, move |_| all_refs(&all))
        .graceful_shutdown_on(shutdown)
        .run(
            move |policy, ctx| policy_status::reconcile(policy, ctx, operands),
            |_, error: &Error, _| operand::retry_transient(error),
            ctx,
        )
        .for_each(|result| log(policy_status::NAME, result))
}

/// Runs the overall status of every NVIDIADriver until `shutdown` resolves, woken when its
/// identity, spec, state or driver condition changes.
pub fn run_nvidia_driver_status(
    ctx: Arc<Context>,
    subs: Subscriptions,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> impl Future<Output = ()> {
    ctx.status_batch
        .summarize_with(nvidia_driver_status::summarizer(Arc::downgrade(&ctx)));
    let drivers = ctx.stores.nvidia_drivers.clone();
    let changes = owner_changes(subs.nvidia_drivers, DRIVER_READY);
    Controller::for_shared_stream(changes, drivers)
        .with_config(coalesce::config())
        .graceful_shutdown_on(shutdown)
        .run(
            nvidia_driver_status::reconcile,
            |_, error: &Error, _| operand::retry_transient(error),
            ctx,
        )
        .for_each(|result| log(nvidia_driver_status::NAME, result))
}

/// Runs the GPUCluster's overall status, finalizer, namespace label and teardown until
/// `shutdown` resolves; `operands` are the condition types of the GPUCluster's operand
/// reconcilers.
pub fn run_gpu_cluster_status(
    ctx: Arc<Context>,
    subs: Subscriptions,
    operands: &'static [&'static str],
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> impl Future<Output = ()> {
    ctx.status_batch
        .summarize_with(gpu_cluster_status::summarizer(
            Arc::downgrade(&ctx),
            operands,
        ));
    let clusters = ctx.stores.gpu_clusters.clone();
    let moved = changes(subs.gpu_clusters, move |cr: &GpuCluster, hasher| {
        let meta = cr.meta();
        (&meta.uid, meta.generation, &meta.finalizers).hash(hasher);
        meta.deletion_timestamp.is_some().hash(hasher);
        let status = cr.status.as_ref();
        status.map(|s| s.state.as_str()).hash(hasher);
        for condition in status
            .and_then(|s| s.conditions.as_deref())
            .unwrap_or_default()
            .iter()
            .filter(|c| operands.contains(&c.type_.as_str()))
        {
            let c = condition;
            (&c.type_, &c.status, &c.reason, c.observed_generation).hash(hasher);
        }
    });
    Controller::for_shared_stream(moved, clusters)
        .with_config(coalesce::config())
        .graceful_shutdown_on(shutdown)
        .run(
            move |cr, ctx| gpu_cluster_status::reconcile(cr, ctx, operands),
            |_, error: &Error, _| operand::retry_transient(error),
            ctx,
        )
        .for_each(|result| log(gpu_cluster_status::NAME, result))
}

/// Runs the summary of the validators' node reports until `shutdown` resolves. Woken by a GPU
/// node appearing or leaving and by a change of a node's validation annotation (at most once per
/// [`SUMMARY_PERIOD`]: each summary reads every node).
pub fn run_node_validation(
    ctx: Arc<Context>,
    subs: Subscriptions,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> impl Future<Output = ()> {
    let policies = ctx.stores.policies.clone();
    let policy_events = owner_changes(subs.policies, NODES_VALIDATED);
    let reports = throttle(subs.node_reports, SUMMARY_PERIOD);
    Controller::for_shared_stream(policy_events, policies.clone())
        .with_config(coalesce::config())
        .watches_shared_stream(reports, move |_| served(&policies))
        .graceful_shutdown_on(shutdown)
        .run(
            node_validation::reconcile,
            |_, error: &Error, _| operand::retry_transient(error),
            ctx,
        )
        .for_each(|result| log(node_validation::NAME, result))
}

/// Runs the GPUCluster's DRA summary ([`dra_resources`]) until `shutdown` resolves. Woken by the
/// GPUCluster, a node's labels (its DRA gate, its GPU count) and the DRA driver's ResourceSlices,
/// at most once per [`SUMMARY_PERIOD`] for the last two (each summary reads every node).
pub fn run_dra_resources(
    ctx: Arc<Context>,
    subs: Subscriptions,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> impl Future<Output = ()> {
    let clusters = ctx.stores.gpu_clusters.clone();
    let (by_nodes, by_slices) = (clusters.clone(), clusters.clone());
    let cluster_events = owner_changes(subs.gpu_clusters, DRA_RESOURCES_PUBLISHED);
    let nodes = throttle(subs.node_labels, SUMMARY_PERIOD);
    let slices = throttle(subs.resource_slices, SUMMARY_PERIOD);
    Controller::for_shared_stream(cluster_events, clusters)
        .with_config(coalesce::config())
        .watches_shared_stream(nodes, move |_| served(&by_nodes))
        .watches_shared_stream(slices, move |_| served(&by_slices))
        .graceful_shutdown_on(shutdown)
        .run(
            dra_resources::reconcile,
            |_, error: &Error, _| operand::retry_transient(error),
            ctx,
        )
        .for_each(|result| log(dra_resources::NAME, result))
}

/// Every ClusterPolicy: a node change may move any one's status (the active one's summary, or
/// which one is active).
fn all_refs(policies: &Store<ClusterPolicy>) -> Vec<ObjectRef<ClusterPolicy>> {
    policies
        .state()
        .iter()
        .map(|p| ObjectRef::from_obj(p.as_ref()))
        .collect()
}
