//! The ClusterPolicy's overall status, NVIDIA's contract: `state`, `namespace` and the paired
//! `Ready`/`Error` conditions, summed up from the per-operand conditions each operand reconciler
//! writes. Also the singleton rule: every ClusterPolicy but the oldest gets `state: ignored`.

use std::{
    sync::{Arc, Weak},
    time::{Duration, Instant},
};

use gpu_operator_api::{
    ClusterPolicy, State,
    conditions::{self as names, reason},
};
use kube::{ResourceExt as _, runtime::controller::Action};
use serde_json::json;

use gpu_operator_core::{
    Context, Error,
    cache::facts::ClusterFacts,
    pipeline::{
        active, leftovers,
        status_batch::{Outgoing, Summarizer},
    },
    report::{conditions::Desired, metrics::ReconciliationStatus},
};

use crate::{
    overall::{self, Overall},
    pod_security,
};

/// Name of this reconciler (field manager suffix, metric label).
pub const NAME: &str = overall::NAME;

/// What the overall status should say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    /// `status.state`.
    pub state: State,
    /// `Ready` condition (the `Error` condition is its opposite).
    pub ready: Desired,
    /// The metric value.
    pub metric: ReconciliationStatus,
    /// Not ready only because operands have not acknowledged the current generation yet (a spec
    /// change they are reconciling this very moment): no failure, no rollout under way.
    pub catching_up: bool,
}

/// Reasons of operand conditions that mean "still rolling out" rather than "failed".
const PROGRESS_REASONS: [&str; 2] = ["NotReady", "RollingOut"];

/// Reasons of `DriverUpgrade` while a node is pending, upgrading or failed.
const UPGRADE_GATE_REASONS: [&str; 2] = ["UpgradeInProgress", "UpgradeFailed"];

/// Sums up `policy` given every ClusterPolicy, the node facts and the operand condition types
/// the operator runs (each must be present and current for the policy to be ready). Pure.
pub fn summarize(
    policy: &ClusterPolicy,
    policies: &[Arc<ClusterPolicy>],
    facts: &ClusterFacts,
    operands: &[&str],
) -> Summary {
    if let Some(active) = active::active(policies).filter(|a| a.name_any() != policy.name_any()) {
        let message = format!(
            "ignored: ClusterPolicy {} is the active one (the oldest); only one ClusterPolicy is reconciled per cluster, delete this one or that one",
            active.name_any()
        );
        return Summary {
            state: State::Ignored,
            ready: Desired::not_ok(names::READY, "Ignored", message),
            metric: ReconciliationStatus::PolicyUnavailable,
            catching_up: false,
        };
    }
    let live = policy
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let generation = policy.metadata.generation;
    let mut failed = Vec::new();
    let mut waiting = Vec::new();
    let mut lagging = 0;
    for operand in operands {
        match live.iter().find(|c| c.type_ == *operand) {
            Some(c) if c.observed_generation != generation => {
                lagging += 1;
                waiting.push(format!("{operand} (not yet reconciled)"));
            }
            Some(c) if c.status == "True" => {}
            // By reason only: the counts and nodes are in the operand's own condition, and the
            // overall status would otherwise move (and be rewritten) with every count.
            Some(c) if PROGRESS_REASONS.contains(&c.reason.as_str()) => {
                waiting.push(format!("{operand} ({})", c.reason));
            }
            Some(c) => failed.push(format!("{operand}: {}", c.message)),
            None => waiting.push(format!("{operand} (not yet reconciled)")),
        }
    }
    // NVIDIA's upgrade gate: while NVIDIADrivers deploy the drivers, a node pending, upgrading or
    // failed keeps the ClusterPolicy not ready; `DriverUpgrade` names the nodes and why.
    if policy.spec.driver.use_nvidia_driver_crd == Some(true)
        && let Some(upgrade) = live.iter().find(|c| {
            c.type_ == names::DRIVER_UPGRADE
                && c.status == "False"
                && UPGRADE_GATE_REASONS.contains(&c.reason.as_str())
        })
    {
        waiting.push(format!(
            "{} ({}: see that condition for the nodes and why)",
            names::DRIVER_UPGRADE,
            upgrade.reason
        ));
    }
    if !failed.is_empty() {
        let message = format!("Failed to reconcile: {}", failed.join("; "));
        return Summary {
            state: State::NotReady,
            ready: Desired::not_ok(names::READY, reason::RECONCILE_FAILED, message),
            metric: ReconciliationStatus::Failed,
            catching_up: false,
        };
    }
    if !waiting.is_empty() {
        let message = format!(
            "ClusterPolicy is not ready; operands not ready: {}",
            waiting.join("; ")
        );
        return Summary {
            state: State::NotReady,
            ready: Desired::not_ok(names::READY, reason::OPERAND_NOT_READY, message),
            metric: ReconciliationStatus::NotReady,
            catching_up: lagging == waiting.len(),
        };
    }
    let ready = if !facts.has_nfd_labels {
        Desired::ok(
            names::READY,
            reason::NFD_LABELS_MISSING,
            "no node carries NFD labels: deploy Node Feature Discovery so GPU nodes can be found",
        )
    } else if facts.gpu_nodes == 0 {
        Desired::ok(
            names::READY,
            reason::NO_GPU_NODES,
            "No GPU node found, watching for new nodes to join the cluster.",
        )
    } else {
        Desired::ok(
            names::READY,
            reason::RECONCILED,
            format!(
                "ClusterPolicy is ready: every operand is ready on {} GPU node(s)",
                facts.gpu_nodes
            ),
        )
    };
    Summary {
        state: State::Ready,
        ready,
        metric: ReconciliationStatus::Ready,
        catching_up: false,
    }
}

/// Reconciles the overall status of `policy`.
pub async fn reconcile(
    policy: Arc<ClusterPolicy>,
    ctx: Arc<Context>,
    operands: &[&str],
) -> Result<Action, Error> {
    let started = Instant::now();
    let facts = ctx.facts();
    let summary = summarize(&policy, &ctx.stores.policies.state(), &facts, operands);
    if summary.state != State::Ignored {
        ctx.metrics
            .set_policy_status(summary.metric, facts.gpu_nodes, facts.has_nfd_labels);
        let nodes = |by_layout: &std::collections::BTreeMap<
            _,
            gpu_operator_core::cache::facts::NodeSample,
        >| { by_layout.values().map(|s| s.count).sum() };
        ctx.metrics
            .set_mig_troubled_nodes(nodes(&facts.mig_failed), nodes(&facts.mig_stuck));
    }
    // psa.enabled: the namespace is labelled before the status is written (NVIDIA's operator
    // labels it first thing); a refusal is retried, and does not hold the status back.
    let labelled = if summary.state == State::Ignored {
        Ok(())
    } else {
        pod_security::reconcile(&ctx, &policy).await
    };
    let deferred = write(&ctx, &policy, &summary);
    let mut result = labelled.map(|()| deferred);
    if summary.state != State::Ignored && result.is_ok() {
        // NVIDIA's leftovers go once everything we render was written (and so taken over).
        if let Err(error) = leftovers::sweep(&ctx, policy.as_ref(), operands).await {
            result = Err(error);
        }
    }
    ctx.metrics.observe(
        NAME,
        started.elapsed(),
        result.as_ref().err().map(Error::category),
    );
    result.map(|deferred| Action::requeue(deferred.unwrap_or(Duration::from_secs(3600))))
}

/// Writes the summary (see [`overall::write`]) with NVIDIA's `namespace`.
fn write(ctx: &Context, policy: &ClusterPolicy, summary: &Summary) -> Option<Duration> {
    let live_namespace = policy.status.as_ref().and_then(|s| s.namespace.as_deref());
    overall::write(
        ctx,
        policy,
        &wanted(summary),
        namespace(ctx),
        live_namespace == Some(ctx.namespace.as_str()),
    )
}

/// The overall status `summary` says, as written.
fn wanted(summary: &Summary) -> Overall {
    Overall {
        state: summary.state.as_str(),
        ready: overall::ready_condition(&summary.ready),
        error: overall::error_condition(&summary.ready),
        catching_up: summary.catching_up,
    }
}

/// NVIDIA's `status.namespace`: the operator's.
fn namespace(ctx: &Context) -> serde_json::Map<String, serde_json::Value> {
    let mut fields = serde_json::Map::new();
    fields.insert("namespace".to_owned(), json!(ctx.namespace));
    fields
}

/// The ClusterPolicy's overall status found for each status request of the operands' conditions
/// (see [`Summarizer`]), so the request that acknowledges a change for the operands
/// acknowledges it for the ClusterPolicy too.
pub fn summarizer(
    ctx: Weak<Context>,
    operands: &'static [&'static str],
) -> Summarizer<ClusterPolicy> {
    Arc::new(move |policy: &ClusterPolicy, outgoing: Outgoing<'_>| {
        let ctx = ctx.upgrade()?;
        let mut policy = policy.clone();
        let status = policy.status.get_or_insert_with(Default::default);
        status.conditions = Some(outgoing.conditions.to_vec());
        let summary = summarize(
            &policy,
            &ctx.stores.policies.state(),
            &ctx.facts(),
            operands,
        );
        let state = outgoing.fields.get("state").and_then(|s| s.as_str());
        let live = overall::Live {
            conditions: outgoing.conditions,
            state,
            fields_current: outgoing.fields.get("namespace") == Some(&json!(ctx.namespace)),
            generation: policy.metadata.generation,
        };
        overall::to_carry(&live, &wanted(&summary), namespace(&ctx))
    })
}

#[cfg(test)]
mod tests {
    use gpu_operator_api::{ClusterPolicySpec, ClusterPolicyStatus};
    use k8s_openapi::{
        apimachinery::pkg::apis::meta::v1::{Condition, Time},
        jiff::Timestamp,
    };

    use super::*;

    fn policy(name: &str, created: i64, conditions: Vec<Condition>) -> Arc<ClusterPolicy> {
        let mut p = ClusterPolicy::new(name, ClusterPolicySpec::default());
        p.metadata.creation_timestamp = Some(Time(Timestamp::from_second(created).unwrap()));
        p.metadata.generation = Some(1);
        p.status = Some(ClusterPolicyStatus {
            conditions: Some(conditions),
            ..ClusterPolicyStatus::default()
        });
        Arc::new(p)
    }

    fn cond(type_: &str, status: &str, reason: &str, message: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: message.into(),
            observed_generation: Some(1),
            last_transition_time: Time(Timestamp::from_second(1).unwrap()),
        }
    }

    const OPERANDS: [&str; 2] = ["DevicePluginReady", "ValidatorReady"];
    fn facts(gpu_nodes: usize, has_nfd_labels: bool) -> ClusterFacts {
        ClusterFacts {
            gpu_nodes,
            has_nfd_labels,
            ..ClusterFacts::default()
        }
    }

    #[test]
    fn ready_when_every_operand_is_ready() {
        let p = policy(
            "a",
            1,
            vec![
                cond("DevicePluginReady", "True", "Ready", ""),
                cond("ValidatorReady", "True", "Disabled", ""),
            ],
        );
        let s = summarize(&p, std::slice::from_ref(&p), &facts(3, true), &OPERANDS);
        assert_eq!(
            (s.state, s.ready.reason.as_str()),
            (State::Ready, reason::RECONCILED)
        );
    }

    #[test]
    fn a_missing_or_rolling_operand_is_not_ready_and_named() {
        let p = policy(
            "a",
            1,
            vec![cond(
                "DevicePluginReady",
                "False",
                "NotReady",
                "ready on 1/3 GPU nodes",
            )],
        );
        let s = summarize(&p, std::slice::from_ref(&p), &facts(3, true), &OPERANDS);
        assert_eq!(s.state, State::NotReady);
        assert_eq!(s.ready.reason, reason::OPERAND_NOT_READY);
        assert!(
            s.ready.message.contains("DevicePluginReady (NotReady)")
                && s.ready.message.contains("ValidatorReady (not yet"),
            "{}",
            s.ready.message
        );
        // The rollout moves on: the overall message stays (nothing to rewrite).
        let later = policy(
            "a",
            1,
            vec![cond(
                "DevicePluginReady",
                "False",
                "NotReady",
                "ready on 2/3 GPU nodes",
            )],
        );
        let s2 = summarize(
            &later,
            std::slice::from_ref(&later),
            &facts(3, true),
            &OPERANDS,
        );
        assert_eq!(s2.ready.message, s.ready.message);
    }

    #[test]
    fn operands_behind_a_spec_change_are_catching_up_unless_one_is_rolling_out() {
        let mut behind = cond("DevicePluginReady", "True", "Ready", "");
        behind.observed_generation = Some(0);
        let p = policy(
            "a",
            1,
            vec![behind.clone(), cond("ValidatorReady", "True", "Ready", "")],
        );
        let s = summarize(&p, std::slice::from_ref(&p), &facts(3, true), &OPERANDS);
        assert_eq!(s.state, State::NotReady);
        assert!(s.catching_up, "{s:?}");
        let p = policy(
            "a",
            1,
            vec![
                behind,
                cond("ValidatorReady", "False", "NotReady", "ready on 1/3"),
            ],
        );
        let s = summarize(&p, std::slice::from_ref(&p), &facts(3, true), &OPERANDS);
        assert!(!s.catching_up, "a rollout under way is not a catch-up");
    }

    #[test]
    fn a_failed_operand_is_a_reconcile_failure_naming_it() {
        let p = policy(
            "a",
            1,
            vec![
                cond(
                    "DevicePluginReady",
                    "False",
                    "ImageUnresolvable",
                    "devicePlugin: no image",
                ),
                cond("ValidatorReady", "True", "Ready", ""),
            ],
        );
        let s = summarize(&p, std::slice::from_ref(&p), &facts(3, true), &OPERANDS);
        assert_eq!(
            (s.ready.reason.as_str(), s.metric),
            (reason::RECONCILE_FAILED, ReconciliationStatus::Failed)
        );
        assert!(s.ready.message.contains("devicePlugin: no image"));
        assert_eq!(overall::ready_condition(&s.ready).reason, reason::ERROR);
        assert_eq!(
            overall::error_condition(&s.ready).reason,
            reason::RECONCILE_FAILED
        );
    }

    #[test]
    fn no_gpu_nodes_and_no_nfd_are_ready_with_their_reasons() {
        let p = policy(
            "a",
            1,
            vec![
                cond("DevicePluginReady", "True", "NoGPUNodes", ""),
                cond("ValidatorReady", "True", "NoGPUNodes", ""),
            ],
        );
        let none = facts(0, true);
        assert_eq!(
            summarize(&p, std::slice::from_ref(&p), &none, &OPERANDS)
                .ready
                .reason,
            reason::NO_GPU_NODES
        );
        let no_nfd = facts(0, false);
        assert_eq!(
            summarize(&p, std::slice::from_ref(&p), &no_nfd, &OPERANDS)
                .ready
                .reason,
            reason::NFD_LABELS_MISSING
        );
    }

    #[test]
    fn an_nvidia_driver_upgrade_under_way_or_failed_keeps_the_policy_not_ready() {
        let conditions = |reason: &str| {
            vec![
                cond("DevicePluginReady", "True", "Ready", ""),
                cond("ValidatorReady", "True", "Ready", ""),
                cond(
                    "DriverUpgrade",
                    "False",
                    reason,
                    "1/2 GPU nodes on the current driver",
                ),
            ]
        };
        for reason in ["UpgradeInProgress", "UpgradeFailed"] {
            let mut p = (*policy("a", 1, conditions(reason))).clone();
            let s = summarize(&p, &[Arc::new(p.clone())], &facts(3, true), &OPERANDS);
            assert_eq!(
                s.state,
                State::Ready,
                "ClusterPolicy mode: NVIDIA has no gate"
            );
            p.spec.driver.use_nvidia_driver_crd = Some(true);
            let s = summarize(&p, &[Arc::new(p.clone())], &facts(3, true), &OPERANDS);
            assert_eq!(s.state, State::NotReady, "{reason}");
            assert!(
                s.ready
                    .message
                    .contains(&format!("DriverUpgrade ({reason}")),
                "{}",
                s.ready.message
            );
            assert!(!s.catching_up);
        }
        let mut p = (*policy("a", 1, conditions("AutoUpgradeDisabled"))).clone();
        p.spec.driver.use_nvidia_driver_crd = Some(true);
        let s = summarize(&p, &[Arc::new(p.clone())], &facts(3, true), &OPERANDS);
        assert_eq!(s.state, State::Ready);
    }

    #[test]
    fn younger_policies_are_ignored_naming_the_active_one() {
        let old = policy("old", 1, vec![]);
        let young = policy("young", 2, vec![]);
        let s = summarize(
            &young,
            &[old.clone(), young.clone()],
            &facts(3, true),
            &OPERANDS,
        );
        assert_eq!(s.state, State::Ignored);
        assert!(
            s.ready
                .message
                .contains("ClusterPolicy old is the active one")
        );
    }
}
