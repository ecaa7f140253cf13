//! The reconcile pipeline every operand shares: validate → render → apply → status. An operand
//! crate supplies the two pure steps through [`crate::contract::Operand`]; this module does the
//! I/O.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use kube::{
    Resource,
    runtime::{controller::Action, events::EventType, reflector::ObjectRef},
};

use crate::{
    Context, Error,
    contract::{Children, Cluster, Operand, Owner, Warning},
    pipeline::{
        active,
        apply::Dependents,
        children, coalesce, events,
        status_write::{self, Desired, Outcome},
    },
    report::rollout_condition,
};

/// Safety resync of a converged operand.
const RESYNC: Duration = Duration::from_secs(3600);
/// How soon a reconcile that found the runtime cache behind the node cache, or GPU candidates
/// the labeller has not labelled yet, tries again.
const FACTS_SETTLING: Duration = Duration::from_millis(200);

/// Reconciles operand `O` for `owner`.
pub async fn reconcile<O: Operand>(
    owner: Arc<O::Owner>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    let started = Instant::now();
    let result = reconcile_once::<O>(&owner, &ctx).await;
    ctx.metrics.observe(
        O::NAME,
        started.elapsed(),
        result.as_ref().err().map(Error::category),
    );
    if let Err(error) = &result {
        let desired = Desired::not_ok(O::CONDITION, error.category(), error.to_string());
        // Report the failure once (condition + Event); repeating the same failure writes nothing.
        if status_write::write(&ctx, owner.as_ref(), O::NAME, &desired) {
            publish(
                &ctx,
                owner.as_ref(),
                EventType::Warning,
                error.category(),
                &desired.message,
            )
            .await;
        }
    }
    result
}

/// The error policy of operand `O` (see [`retry_transient`]).
pub fn error_policy<O: Operand>(
    _owner: Arc<O::Owner>,
    error: &Error,
    _ctx: Arc<Context>,
) -> Action {
    retry_transient(error)
}

/// The decision table for errors of every reconciler: a spec problem waits for a change, the
/// rest retry.
pub fn retry_transient(error: &Error) -> Action {
    if error.is_transient() {
        Action::requeue(Duration::from_secs(10))
    } else {
        Action::await_change()
    }
}

/// The children, the condition replacing the rollout's, the unserved sentence, the warnings.
type Plan = (Children, Option<Desired>, Option<String>, Vec<Warning>);

/// What the operand renders and reports for `spec`: the children, a condition that replaces the
/// rollout's (disabled, the operand's own summary, no GPU nodes), the sentence on unserved nodes, warnings.
fn plan<O: Operand>(
    spec: &<O::Owner as Owner>::Spec,
    cluster: &Cluster<'_>,
) -> Result<Plan, Error> {
    Ok(match O::validate(spec, cluster)? {
        None => (
            O::render_disabled(spec, cluster),
            Some(Desired::ok(
                O::CONDITION,
                "Disabled",
                O::disabled_because(spec, cluster).unwrap_or_else(|| {
                    format!("{}.enabled is false: nothing deployed", O::SECTION)
                }),
            )),
            None,
            Vec::new(),
        ),
        Some(input) if let Some(summary) = O::summary(&input) => (
            Children::default(),
            Some(if summary.ready {
                Desired::ok(O::CONDITION, summary.reason, summary.message)
            } else {
                Desired::not_ok(O::CONDITION, summary.reason, summary.message)
            }),
            None,
            O::warnings(&input),
        ),
        Some(_) if cluster.facts.gpu_nodes == 0 => (
            Children::default(),
            Some(Desired::ok(
                O::CONDITION,
                "NoGPUNodes",
                "no GPU nodes: nothing deployed yet",
            )),
            None,
            Vec::new(),
        ),
        Some(input) => (
            O::render(&input),
            None,
            O::unserved(&input),
            O::warnings(&input),
        ),
    })
}

async fn reconcile_once<O: Operand>(owner: &O::Owner, ctx: &Context) -> Result<Action, Error> {
    let owners = <O::Owner as Owner>::cache(&ctx.stores);
    if !active::is_active(owner, &owners.state()) {
        return Ok(Action::await_change());
    }
    let image_env = |name: &str| ctx.image_env(name).map(str::to_owned);
    let config_maps = |name: &str| {
        ctx.stores
            .config_maps
            .get(&ObjectRef::new(name).within(&ctx.namespace))
    };
    let facts = ctx.facts();
    let policy = active::active(&ctx.stores.policies.state());
    if facts.gpu_nodes_without_runtime > 0 {
        // A node just became a GPU node and the runtime cache has not seen it yet: rendering now
        // would write a pod template from half the facts and rewrite it a moment later, and a
        // driver pod (OnDelete) would keep the first one.
        tracing::debug!(
            operand = O::NAME,
            nodes = facts.gpu_nodes_without_runtime,
            "runtime cache behind the node cache; rendering once it catches up"
        );
        return Ok(Action::requeue(FACTS_SETTLING));
    }
    if ctx
        .labeller_wait
        .should_wait(facts.gpu_candidates_unlabelled, Instant::now())
    {
        // The labeller is labelling GPU nodes right now (a ClusterPolicy just created): the
        // set of GPU nodes is about to change; the labels' watch events wake this reconciler.
        tracing::debug!(
            operand = O::NAME,
            nodes = facts.gpu_candidates_unlabelled,
            "GPU candidates not labelled yet; rendering once the labeller has labelled them"
        );
        return Ok(Action::requeue(FACTS_SETTLING));
    }
    let cluster = Cluster {
        namespace: &ctx.namespace,
        facts: &facts,
        image_env: &image_env,
        config_maps: &config_maps,
        policy: policy.as_ref().map(|p| &p.spec),
        server: &ctx.server,
    };
    let (children, state, unserved, mut warnings) = plan::<O>(owner.spec(), &cluster)?;
    if let Some(seed) = owner.seed_status() {
        // Its status event wakes this reconciler again, which then writes the condition.
        seed_status(ctx, owner, seed).await?;
    }
    warnings.extend(owner.section_warnings(O::SECTION));
    warnings.extend(O::placement_warnings(owner.spec(), &cluster, &ctx.stores));
    let started = Instant::now();
    let pods = if O::hands_over(owner.spec(), &cluster) {
        Dependents::LeftRunning
    } else {
        Dependents::Deleted
    };
    let written =
        children::apply_all(ctx, owner, O::NAME, &children, O::SERVICE_MONITORS, pods).await?;
    ctx.sweeps.applied(O::CONDITION, owner);
    if !children.service_monitors.is_empty() && !facts.service_monitor_crd {
        warnings.push(Warning::service_monitor_crd_missing(O::SECTION));
    }
    if !children.prometheus_rules.is_empty() && !facts.prometheus_rule_crd {
        warnings.push(Warning::prometheus_rule_crd_missing(O::SECTION));
    }
    if written > 0 && repairs::<O>(ctx, owner) {
        ctx.applied_events
            .note(&ctx.recorder, owner, O::SECTION, written);
    }
    let applied = started.elapsed();
    // The condition lists pods and writes the status: when a newer spec arrives meanwhile, that
    // work is for a generation already gone, and the new spec's apply would wait for it. It is
    // dropped and the controller's follow-up reconcile (queued by that very change) starts now.
    let report = report::<O>(ctx, owner, &children, state, unserved, &warnings);
    let events = <O::Owner as Owner>::events(&ctx.stores);
    let outcome = tokio::select! {
        biased;
        () = coalesce::overtaken(owners, events, owner) => None,
        outcome = report => Some(outcome?),
    };
    tracing::debug!(
        reconciler = O::NAME,
        generation = owner.meta().generation,
        apply_ms = applied.as_millis(),
        status_ms = started.elapsed().saturating_sub(applied).as_millis(),
        written,
        ?outcome,
        "reconcile phases"
    );
    Ok(match outcome {
        None => Action::requeue(Duration::ZERO),
        Some(Outcome::Deferred(after)) => Action::requeue(after),
        Some(Outcome::Current | Outcome::Written) => Action::requeue(RESYNC),
    })
}

/// Whether the operand's writes now repair something rather than answer a spec change (see
/// [`events::repairs`]).
fn repairs<O: Operand>(ctx: &Context, owner: &O::Owner) -> bool {
    let live = owner
        .conditions()
        .and_then(|c| c.iter().find(|c| c.type_ == O::CONDITION))
        .and_then(|c| c.observed_generation);
    let batched = ctx
        .status_batch
        .condition(owner, O::CONDITION)
        .and_then(|c| c.observed_generation);
    events::repairs(owner.meta().generation, [live, batched])
}

/// The operand's condition after an apply: `state` when the plan decided it, else the rollout
/// of `children`; written (gated), with the first sighting of each warning as an Event.
async fn report<O: Operand>(
    ctx: &Context,
    owner: &O::Owner,
    children: &Children,
    state: Option<Desired>,
    unserved: Option<String>,
    warnings: &[Warning],
) -> Result<Outcome, Error> {
    let desired = match state {
        Some(state) => state,
        None => rollout_condition::rollout_condition::<O>(ctx, children, unserved).await?,
    };
    let desired = crate::pipeline::warning::with_warnings(desired, warnings);
    let live_message = owner
        .conditions()
        .and_then(|c| c.iter().find(|c| c.type_ == O::CONDITION))
        .map(|c| c.message.clone())
        .unwrap_or_default();
    let outcome = status_write::write_gated(ctx, owner, O::NAME, &desired);
    // Racing reconciles may both see a cached ClusterPolicy without the new condition: the
    // process remembers what it published, so each finding is one Event.
    // (Recorded only with a write: a condition not written yet publishes nothing.)
    if outcome == Outcome::Written {
        let messages: Vec<&str> = warnings.iter().map(|w| w.message.as_str()).collect();
        let fresh = ctx.warned.first_seen(O::CONDITION, &messages);
        for warning in warnings.iter().filter(|w| {
            w.publishes_event()
                && fresh.contains(&w.message.as_str())
                && !live_message.contains(&w.message)
        }) {
            publish(
                ctx,
                owner,
                EventType::Warning,
                warning.reason,
                &warning.message,
            )
            .await;
        }
    }
    Ok(outcome)
}

/// Field manager of the status a kind's [`Owner::seed_status`] creates.
const SEED_MANAGER: &str = "gpu-operator/status-seed";

/// Creates `owner`'s status with `seed` (server-side apply, its own field manager, so the
/// conditions' requests never drop it).
async fn seed_status<K: Owner>(
    ctx: &Context,
    owner: &K,
    seed: serde_json::Value,
) -> Result<(), Error> {
    let name = owner.meta().name.clone().unwrap_or_default();
    let patch = serde_json::json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": seed,
    });
    kube::Api::<K>::all(ctx.client.clone())
        .patch_status(
            &name,
            &kube::api::PatchParams::apply(SEED_MANAGER).force(),
            &kube::api::Patch::Apply(&patch),
        )
        .await
        .map_err(Error::kube(format!(
            "creating the status of {} {name}",
            K::kind(&())
        )))?;
    Ok(())
}

async fn publish<K: Owner>(ctx: &Context, owner: &K, type_: EventType, reason: &str, note: &str) {
    events::publish(&ctx.recorder, &owner.object_ref(&()), type_, reason, note).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{cache::facts::ClusterFacts, pipeline::test_pool::PoolDriver};

    #[test]
    fn another_owner_kinds_operand_plans_from_its_own_spec() {
        let facts = ClusterFacts {
            gpu_nodes: 2,
            ..ClusterFacts::default()
        };
        let cluster = Cluster {
            namespace: "gpu-operator",
            facts: &facts,
            image_env: &|_| None,
            config_maps: &|_| None,
            policy: None,
            server: crate::cache::server_facts::ServerFacts::unknown(),
        };
        let pool = crate::pipeline::test_pool::Pool::new("a", "p1", Some("550"));
        let (children, state, _, _) = plan::<PoolDriver>(pool.spec(), &cluster).unwrap();
        assert_eq!(
            children.config_maps[0].metadata.name.as_deref(),
            Some("driver-550")
        );
        assert!(state.is_none(), "the rollout decides the condition");
        let off = crate::pipeline::test_pool::Pool::new("b", "p2", None);
        let (children, state, _, _) = plan::<PoolDriver>(off.spec(), &cluster).unwrap();
        assert_eq!(children.len(), 0);
        let state = state.unwrap();
        assert_eq!(
            (
                state.type_.as_str(),
                state.reason.as_str(),
                state.message.as_str()
            ),
            (
                "DriverReady",
                "Disabled",
                "version.enabled is false: nothing deployed"
            )
        );
    }
}
