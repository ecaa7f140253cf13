//! The driver upgrade reconciler: one pass reads the facts of every GPU node from the caches,
//! splits them by pool ([`crate::pools`]: the ClusterPolicy's, and each NVIDIADriver's with a
//! policy of its own), runs [`crate::plan`] per pool and carries the steps out
//! ([`crate::node_step`]) — evictions and pod deletions first, then one merge patch per node that
//! moves, then the Events, the gauges and the `DriverUpgrade` condition.
//!
//! Watch-driven: woken by a change of the ClusterPolicy's spec, of an NVIDIADriver's spec or
//! observed generation, of a driver DaemonSet's template (any pool's), of a GPU node's upgrade
//! labels, annotations, cordon or readiness, and of a driver (any pool's) or validator pod. Nothing is requeued while nothing upgrades; a node that waits on pods outside these
//! caches (jobs, evictions) is looked at every few seconds, and one that waits on a timeout when
//! the timeout falls due.

use std::{
    future::Future,
    hash::Hash as _,
    sync::Arc,
    time::{Duration, Instant},
};

use futures::{StreamExt as _, TryStreamExt as _, stream};
use gpu_operator_api::{ClusterPolicy, conditions::operand::DRIVER_READY, labels};
use gpu_operator_core::{
    Context, Error,
    cache::stores::Subscriptions,
    pipeline::{
        active,
        coalesce::{self, BURST_PERIOD, throttle},
        controller::{changes, served},
        operand::retry_transient,
        status_write::{self, Outcome},
    },
};
use k8s_openapi::jiff::Timestamp;
use kube::{
    Api,
    runtime::{
        Controller, WatchStreamExt as _,
        controller::Action,
        reflector::{self, Store},
        watcher,
    },
};

use crate::{
    actions::release,
    caught_up,
    condition::{self, Off, Summary},
    in_flight::InFlight,
    node_step::run_node,
    plan::Step,
    policy::Policy,
    pools::{Pools, Split},
    selector_check::SelectorCheck,
    triggers,
    view::{self, OperandPod, Templates, UpgradeNode},
};

/// Name of this reconciler (field manager suffix, metric label).
pub const NAME: &str = "driver-upgrade";
/// How soon a pass looks again while its caches have not had their first list.
const CACHES_FILLING: Duration = Duration::from_millis(200);
/// How many nodes are worked on at once within a pass.
const CONCURRENCY: usize = 16;

/// The reconciler's state: the shared context and its own two caches.
pub struct Upgrades {
    ctx: Arc<Context>,
    nodes: Store<UpgradeNode>,
    pods: Store<OperandPod>,
    /// The driver pods of NVIDIADriver pools, whose `app` labels differ per pool.
    pool_pods: Store<OperandPod>,
    written: InFlight,
    selector_check: SelectorCheck,
}

/// Runs the driver upgrade reconciler until `shutdown` resolves.
pub fn controller(
    ctx: Arc<Context>,
    subs: Subscriptions,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> impl Future<Output = ()> {
    let (nodes, node_writer) = reflector::store();
    let (pods, pod_writer) = reflector::store();
    let (pool_pods, pool_pod_writer) = reflector::store();
    let gpu_nodes = watcher::Config::default().labels(&format!("{}=true", labels::GPU_PRESENT));
    let operand_pods = watcher::Config::default().labels(&view::operand_pods_selector());
    // The Controller polls these (and so fills both caches) also while a pass runs.
    let node_changes = triggers::touched_if(
        watcher(Api::<UpgradeNode>::all(ctx.client.clone()), gpu_nodes).default_backoff(),
        node_writer,
        UpgradeNode::upgrade_inputs_changed,
    );
    let pod_changes = triggers::touched(
        watcher(
            Api::<OperandPod>::namespaced(ctx.client.clone(), &ctx.namespace),
            operand_pods,
        )
        .default_backoff(),
        pod_writer,
    );
    let pool_driver_pods = watcher::Config::default().labels(&view::pool_driver_pods_selector());
    let pool_pod_changes = triggers::touched(
        watcher(
            Api::<OperandPod>::namespaced(ctx.client.clone(), &ctx.namespace),
            pool_driver_pods,
        )
        .default_backoff(),
        pool_pod_writer,
    );
    // A pool's own upgrade policy, and its driver reconciler catching up with its spec.
    let nvidia_drivers = changes(subs.nvidia_drivers, |d, h| {
        (
            &d.metadata.uid,
            d.metadata.generation,
            d.status.as_ref().and_then(|s| s.observed_generation),
        )
            .hash(h);
    });
    let policies = ctx.stores.policies.clone();
    let (p1, p2, p3, p4, p5) = (
        policies.clone(),
        policies.clone(),
        policies.clone(),
        policies.clone(),
        policies.clone(),
    );
    let policy_events = changes(subs.policies, |p, h| {
        (
            &p.metadata.uid,
            p.metadata.generation,
            p.metadata.deletion_timestamp.is_some(),
        )
            .hash(h);
        p.status
            .as_ref()
            .map(|s| std::mem::discriminant(&s.state))
            .hash(h);
    });
    let templates = throttle(
        changes(
            subs.daemonsets
                .filter(|ds| std::future::ready(view::is_driver(ds))),
            |ds, h| ds.metadata.generation.hash(h),
        ),
        BURST_PERIOD,
    );
    let upgrades = Arc::new(Upgrades {
        ctx,
        nodes,
        pods,
        pool_pods,
        written: InFlight::default(),
        selector_check: SelectorCheck::default(),
    });
    let node_changes = throttle(node_changes, BURST_PERIOD);
    let pod_changes = throttle(pod_changes, BURST_PERIOD);
    let pool_pod_changes = throttle(pool_pod_changes, BURST_PERIOD);
    Controller::for_shared_stream(policy_events, policies)
        .with_config(coalesce::config())
        .watches_shared_stream(templates, move |_| served(&p1))
        .watches_shared_stream(node_changes, move |_| served(&p2))
        .watches_shared_stream(pod_changes, move |_| served(&p3))
        .watches_shared_stream(pool_pod_changes, move |_| served(&p4))
        .watches_shared_stream(nvidia_drivers, move |_| served(&p5))
        .graceful_shutdown_on(shutdown)
        .run(
            reconcile,
            |_, error: &Error, _| retry_transient(error),
            upgrades,
        )
        .for_each(|result| {
            if let Err(error) = result {
                tracing::warn!(reconciler = NAME, %error, "reconcile failed");
            }
            std::future::ready(())
        })
}

/// One pass over every GPU node.
pub async fn reconcile(policy: Arc<ClusterPolicy>, up: Arc<Upgrades>) -> Result<Action, Error> {
    if !active::is_active(policy.as_ref(), &up.ctx.stores.policies.state()) {
        return Ok(Action::await_change());
    }
    // A pass on half-filled caches would see nodes without their driver pods, so it waits for
    // their first lists — by looking again shortly, not by awaiting them: the Controller fills
    // them through its trigger streams, which it stops polling at shutdown while it waits for
    // the running reconciles (an awaiting one never finished, and neither did the process).
    if !is_ready(&up.nodes) || !is_ready(&up.pods) || !is_ready(&up.pool_pods) {
        return Ok(Action::requeue(CACHES_FILLING));
    }
    let started = Instant::now();
    let result = pass(&policy, &up).await;
    up.ctx.metrics.observe(
        NAME,
        started.elapsed(),
        result.as_ref().err().map(Error::category),
    );
    result
}

/// Whether `cache` has had its first full list.
fn is_ready<K: kube::Resource + Clone>(cache: &Store<K>) -> bool
where
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    matches!(
        futures::FutureExt::now_or_never(cache.wait_until_ready()),
        Some(Ok(()))
    )
}

async fn pass(policy: &ClusterPolicy, up: &Upgrades) -> Result<Action, Error> {
    let ctx = &up.ctx;
    let submitted = ctx.status_batch.condition(policy, DRIVER_READY);
    if policy.spec.driver.enabled != Some(false)
        && !caught_up::driver_caught_up(policy, submitted.as_ref())
    {
        // The driver DaemonSets may still hold the previous spec's template.
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    let spec = &policy.spec;
    let resolved = Policy::resolve(spec.driver.upgrade_policy.as_ref())
        .map(|p| p.with_gpu_users(spec, &ctx.namespace));
    let cluster_on = resolved.as_ref().is_ok_and(|p| p.auto_upgrade);
    let daemonsets = ctx.stores.daemonsets.state();
    let templates = Templates::new(&daemonsets);
    let sandbox = spec.sandbox_enabled();
    let nodes = up.nodes.state();
    let pods: Vec<Arc<OperandPod>> = up
        .pods
        .state()
        .into_iter()
        .chain(up.pool_pods.state())
        .collect();
    let off = if spec.driver.enabled == Some(false) {
        Some(Off::DriverDisabled)
    } else if sandbox {
        Some(Off::Sandbox)
    } else if templates.is_empty() {
        Some(Off::NoDaemonSet)
    } else {
        None
    };
    let pools = Pools::new(
        spec,
        resolved,
        &ctx.stores.nvidia_drivers.state(),
        &ctx.namespace,
    );
    if off.is_some() || !pools.any_on() {
        return hand_back_all(ctx, policy, (&nodes, &pods, &templates), &pools, off).await;
    }
    let selector = spec
        .driver
        .upgrade_policy
        .as_ref()
        .and_then(|u| u.pod_deletion.as_ref()?.pod_selector.as_deref());
    if cluster_on {
        up.selector_check.check(ctx, policy, selector).await;
    }
    let mut all = view::node_facts(&nodes, &pods, &templates, false);
    let in_flight = up.written.overlay(&mut all);
    let split = pools.split(all);
    release(ctx, &split.handed_back).await?;
    let (admitted, available) = pools.admit(&split);
    let current_elsewhere = split.current_elsewhere();
    let catching_up = !split.catching_up.is_empty();
    let Split {
        follow: facts,
        policies,
        ..
    } = split;
    let now = Timestamp::now();
    // By index: rustc cannot prove `Send` a pass that holds an iterator whose closure takes a
    // borrowed node (a higher-ranked lifetime), across an await.
    let (admitted, in_flight, policies) = (&admitted, &in_flight, &policies);
    let work = (0..facts.len()).map(|i| {
        let node = &facts[i];
        async move {
            if in_flight.contains(&node.name) {
                return Ok(Step {
                    node: node.name.clone(),
                    ..Step::default()
                });
            }
            let step = run_node(ctx, node, policies[i], admitted.contains(&node.name), now).await?;
            up.written.wrote(&node.name, &step);
            Ok::<_, Error>(step)
        }
    });
    let steps: Vec<Step> = bounded(work, CONCURRENCY).try_collect().await?;
    let mut summary = Summary::of(&facts, &steps, available);
    // The nodes of pools not upgraded now count as on the current driver when they are.
    summary.current += current_elsewhere;
    summary.total = summary.total.max(view::driver_nodes(&nodes, &facts));
    summary.invalid = pools.invalid().into_iter().map(str::to_owned).collect();
    ctx.metrics.set_driver_upgrades(&summary.gauges(true));
    let recheck = steps
        .iter()
        .filter_map(|s| s.wait.as_ref()?.recheck)
        .chain(catching_up.then_some(Duration::from_secs(1)))
        .min();
    Ok(write_condition(
        ctx,
        policy,
        &summary.condition(now),
        recheck,
    ))
}

/// The pass while no pool upgrades automatically (`off` says why, when it is not the policies):
/// every node handed back, the gauges and the condition say so.
async fn hand_back_all(
    ctx: &Context,
    policy: &ClusterPolicy,
    (nodes, pods, templates): (&[Arc<UpgradeNode>], &[Arc<OperandPod>], &Templates<'_>),
    pools: &Pools,
    off: Option<Off>,
) -> Result<Action, Error> {
    let facts = view::node_facts(nodes, pods, templates, true);
    release(ctx, &facts).await?;
    let current = facts
        .iter()
        .filter(|n| {
            n.driver
                .as_ref()
                .is_some_and(|d| d.in_sync && !d.terminating)
        })
        .count();
    let summary = Summary {
        total: view::driver_nodes(nodes, &facts),
        current,
        ..Summary::default()
    };
    ctx.metrics.set_driver_upgrades(&summary.gauges(false));
    let invalid = pools.invalid();
    let desired = if let (None, Some(first)) = (off, invalid.first()) {
        gpu_operator_core::report::conditions::Desired::not_ok(
            gpu_operator_api::conditions::DRIVER_UPGRADE,
            "InvalidUpgradePolicy",
            (*first).to_owned(),
        )
    } else {
        condition::disabled(current, summary.total, off.unwrap_or(Off::AutoUpgrade))
    };
    Ok(write_condition(ctx, policy, &desired, None))
}

/// Runs the futures `work` yields, in order, at most `limit` at once. `work` is an iterator that
/// makes each future when asked, and a future is asked for only when a slot is free, so no more
/// than `limit` of them (each holding the state of its requests, kilobytes apiece) are alive at
/// once, whatever the fleet's size.
fn bounded<I>(work: I, limit: usize) -> impl futures::Stream<Item = <I::Item as Future>::Output>
where
    I: IntoIterator,
    I::Item: Future,
{
    stream::iter(work).buffered(limit)
}

fn write_condition(
    ctx: &Context,
    policy: &ClusterPolicy,
    desired: &gpu_operator_core::report::conditions::Desired,
    recheck: Option<Duration>,
) -> Action {
    let deferred = match status_write::write_gated(ctx, policy, NAME, desired) {
        Outcome::Deferred(after) => Some(after),
        Outcome::Written => {
            tracing::debug!(
                reconciler = NAME,
                reason = %desired.reason,
                message = %desired.message,
                "condition written"
            );
            None
        }
        Outcome::Current => None,
    };
    match recheck.into_iter().chain(deferred).min() {
        Some(after) => Action::requeue(after.max(Duration::from_secs(1))),
        None => Action::await_change(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    };

    use futures::StreamExt as _;

    use super::bounded;

    /// Counts the futures alive: one more when a future is made, one less when it ends.
    #[derive(Default)]
    struct Alive {
        now: AtomicUsize,
        most: AtomicUsize,
    }

    struct Guard(Arc<Alive>);

    impl Guard {
        fn new(alive: &Arc<Alive>) -> Self {
            let now = alive.now.fetch_add(1, Ordering::SeqCst) + 1;
            alive.most.fetch_max(now, Ordering::SeqCst);
            Self(alive.clone())
        }
    }

    impl Drop for Guard {
        fn drop(&mut self) {
            self.0.now.fetch_sub(1, Ordering::SeqCst);
        }
    }

    #[tokio::test]
    async fn a_pass_over_a_large_fleet_holds_only_a_few_node_futures_at_once() {
        let nodes: Vec<usize> = (0..1000).collect();
        let alive = Arc::new(Alive::default());
        let work = nodes.iter().map(|n| {
            let guard = Guard::new(&alive);
            async move {
                tokio::task::yield_now().await;
                drop(guard);
                *n
            }
        });
        let done: Vec<usize> = bounded(work, 16).collect().await;
        assert_eq!(done, nodes, "every node, in order");
        let most = alive.most.load(Ordering::SeqCst);
        assert!(
            (2..=16).contains(&most),
            "{most} node futures alive at once (positive control: more than one ran at a time)"
        );
    }
}
