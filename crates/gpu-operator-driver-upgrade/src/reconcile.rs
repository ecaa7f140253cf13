//! The driver upgrade reconciler: one pass reads the facts of every GPU node from the caches,
//! runs [`plan`] and carries its steps out — evictions and pod deletions first, then one merge
//! patch per node that moves, then the Events, the gauges and the `DriverUpgrade` condition.
//!
//! Watch-driven: woken by a change of the ClusterPolicy's spec, of a driver DaemonSet's template,
//! of a GPU node's upgrade labels, annotations, cordon or readiness, and of a driver or validator
//! pod. Nothing is requeued while nothing upgrades; a node that waits on pods outside these
//! caches (jobs, evictions) is looked at every few seconds, and one that waits on a timeout when
//! the timeout falls due.

use std::{
    collections::BTreeSet,
    future::Future,
    hash::Hash as _,
    sync::Arc,
    time::{Duration, Instant},
};

use futures::{StreamExt as _, TryStreamExt as _, stream};
use gpu_operator_api::{ClusterPolicy, labels};
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
    report::metrics::DriverRestart,
};
use k8s_openapi::{api::core::v1::Pod, jiff::Timestamp};
use kube::{
    Api, ResourceExt as _,
    api::{DeleteParams, Patch, Preconditions},
    runtime::{
        Controller, WatchStreamExt as _,
        controller::Action,
        reflector::{self, Store},
        watcher,
    },
};

use crate::{
    actions::{evict, patch_json, pods_on, publish, release},
    caught_up,
    condition::{self, Off, Summary},
    facts::NodeFacts,
    in_flight::InFlight,
    plan::{self, POLL, StateLabel, Step, Wait},
    policy::Policy,
    selector_check::SelectorCheck,
    state::UpgradeState,
    triggers,
    view::{self, DRIVER_APP, OperandPod, Templates, UpgradeNode, VALIDATOR_APP},
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
    let gpu_nodes = watcher::Config::default().labels(&format!("{}=true", labels::GPU_PRESENT));
    let operand_pods =
        watcher::Config::default().labels(&format!("app in ({DRIVER_APP},{VALIDATOR_APP})"));
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
    let policies = ctx.stores.policies.clone();
    let (p1, p2, p3) = (policies.clone(), policies.clone(), policies.clone());
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
            subs.daemonsets.filter(|ds| {
                std::future::ready(ds.labels().get("app").is_some_and(|a| a == DRIVER_APP))
            }),
            |ds, h| ds.metadata.generation.hash(h),
        ),
        BURST_PERIOD,
    );
    let upgrades = Arc::new(Upgrades {
        ctx,
        nodes,
        pods,
        written: InFlight::default(),
        selector_check: SelectorCheck::default(),
    });
    let node_changes = throttle(node_changes, BURST_PERIOD);
    let pod_changes = throttle(pod_changes, BURST_PERIOD);
    Controller::for_shared_stream(policy_events, policies)
        .with_config(coalesce::config())
        .watches_shared_stream(templates, move |_| served(&p1))
        .watches_shared_stream(node_changes, move |_| served(&p2))
        .watches_shared_stream(pod_changes, move |_| served(&p3))
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
    if !is_ready(&up.nodes) || !is_ready(&up.pods) {
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
    if policy.spec.driver.enabled != Some(false) && !caught_up::driver_caught_up(policy) {
        // The driver DaemonSets may still hold the previous spec's template.
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    let spec = &policy.spec;
    let resolved = Policy::resolve(spec.driver.upgrade_policy.as_ref())
        .map(|p| p.with_gpu_users(spec, &ctx.namespace));
    let daemonsets = ctx.stores.daemonsets.state();
    let templates = Templates::new(&daemonsets);
    let sandbox = spec.sandbox_workloads.as_ref().and_then(|s| s.enabled) == Some(true);
    let nodes = up.nodes.state();
    let pods = up.pods.state();
    let policy_ok = match resolved {
        Ok(p)
            if p.auto_upgrade
                && spec.driver.enabled != Some(false)
                && !sandbox
                && !templates.is_empty() =>
        {
            p
        }
        other => {
            let facts = view::node_facts(&nodes, &pods, &templates, true);
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
                total: view::driver_nodes(&nodes, &facts),
                current,
                ..Summary::default()
            };
            ctx.metrics.set_driver_upgrades(&summary.gauges(false));
            let desired = match other {
                Err(invalid) => gpu_operator_core::report::conditions::Desired::not_ok(
                    gpu_operator_api::conditions::DRIVER_UPGRADE,
                    "InvalidUpgradePolicy",
                    invalid.to_string(),
                ),
                Ok(p) => {
                    let why = if spec.driver.enabled == Some(false) {
                        Off::DriverDisabled
                    } else if sandbox {
                        Off::Sandbox
                    } else if !p.auto_upgrade {
                        Off::AutoUpgrade
                    } else {
                        Off::NoDaemonSet
                    };
                    condition::disabled(current, summary.total, why)
                }
            };
            return Ok(write_condition(ctx, policy, &desired, None));
        }
    };
    let selector = spec
        .driver
        .upgrade_policy
        .as_ref()
        .and_then(|u| u.pod_deletion.as_ref()?.pod_selector.as_deref());
    up.selector_check.check(ctx, policy, selector).await;
    let mut facts = view::node_facts(&nodes, &pods, &templates, false);
    let in_flight = up.written.overlay(&mut facts);
    let admitted: BTreeSet<String> = plan::admit(&facts, &policy_ok).into_iter().collect();
    let available = plan::available(&facts, &policy_ok).saturating_sub(admitted.len());
    let now = Timestamp::now();
    // By index: rustc cannot prove `Send` a pass that holds an iterator whose closure takes a
    // borrowed node (a higher-ranked lifetime), across an await.
    let (policy_ok, admitted, in_flight) = (&policy_ok, &admitted, &in_flight);
    let work = (0..facts.len()).map(|i| {
        let node = &facts[i];
        async move {
            if in_flight.contains(&node.name) {
                return Ok(Step {
                    node: node.name.clone(),
                    ..Step::default()
                });
            }
            let step = run_node(ctx, node, policy_ok, admitted.contains(&node.name), now).await?;
            up.written.wrote(&node.name, &step);
            Ok::<_, Error>(step)
        }
    });
    let steps: Vec<Step> = bounded(work, CONCURRENCY).try_collect().await?;
    let mut summary = Summary::of(&facts, &steps, available);
    summary.total = summary.total.max(view::driver_nodes(&nodes, &facts));
    ctx.metrics.set_driver_upgrades(&summary.gauges(true));
    let recheck = steps.iter().filter_map(|s| s.wait.as_ref()?.recheck).min();
    Ok(write_condition(
        ctx,
        policy,
        &summary.condition(now),
        recheck,
    ))
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

/// Plans and carries out the step of one node.
async fn run_node(
    ctx: &Context,
    node: &NodeFacts,
    policy: &Policy,
    admitted: bool,
    now: Timestamp,
) -> Result<Step, Error> {
    let lists_pods = matches!(
        node.state,
        Some(
            UpgradeState::WaitForJobsRequired
                | UpgradeState::PodDeletionRequired
                | UpgradeState::DrainRequired
        )
    );
    let workloads = if lists_pods {
        let mut workloads = pods_on(ctx, &node.name).await?;
        crate::dra_claims::mark(ctx, &mut workloads).await?;
        workloads
    } else {
        Vec::new()
    };
    let mut step = plan::step(node, policy, admitted, &workloads, now);
    for (namespace, name) in &step.evict {
        if let Some(blocked) = evict(ctx, namespace, name).await? {
            step.wait = Some(Wait {
                reason: format!(
                    "{blocked}; {}",
                    step.wait
                        .as_ref()
                        .map(|w| w.reason.as_str())
                        .unwrap_or_default()
                ),
                recheck: Some(POLL * 2),
                stuck: true,
            });
        }
    }
    let operand_pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    for (name, uid) in &step.delete {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(uid.clone()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match operand_pods.delete(name, &params).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {}
            Err(e) => {
                return Err(Error::kube(format!(
                    "deleting pod {name} to upgrade node {}",
                    node.name
                ))(e));
            }
        }
    }
    if let Some(patch) = patch_json(&step) {
        let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(ctx.client.clone());
        nodes
            .patch(
                &node.name,
                &crate::actions::node_patch_params(),
                &Patch::Merge(&patch),
            )
            .await
            .map_err(Error::kube(format!(
                "moving node {} to its next driver upgrade state",
                node.name
            )))?;
        if let Some(event) = &step.event {
            publish(ctx, &node.name, event).await;
        }
        if let Some(decision) = restart_decision(node, &step) {
            tracing::info!(node = node.name, ?decision, "driver pod restart decided");
            ctx.metrics.count_driver_restart(decision);
        }
        tracing::info!(node = node.name, from = ?node.state, to = ?step.patch.state, "driver upgrade step");
    }
    Ok(step)
}

/// Why `step` begins restarting the driver pod of `node`, when it admits the node: a full
/// upgrade (cordoned next), or a restart in place (straight to the restart).
fn restart_decision(node: &NodeFacts, step: &Step) -> Option<DriverRestart> {
    if node.state != Some(UpgradeState::Required) {
        return None;
    }
    match step.patch.state {
        StateLabel::Set(UpgradeState::CordonRequired) => Some(DriverRestart::Upgrade),
        StateLabel::Set(UpgradeState::PodRestartRequired) => Some(DriverRestart::InPlace),
        _ => None,
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
