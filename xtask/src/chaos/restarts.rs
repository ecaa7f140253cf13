//! Scenario "control plane restarted": kube-apiserver, then etcd, stopped and started again with
//! the same flags and data while the operator is idle and a moment into a full-stack rollout.
//! Each time the operator must end `ready`; a ClusterPolicy change made as soon as the component
//! is back must reach its DaemonSet within [`ACT_WITHIN`] (whichever operator process leads by
//! then); its watches must resume rather than relist in a storm; and once converged it writes
//! nothing. LISTs are counted in the audit log (those the API server served, from the round's
//! start until converged; refused ones apart) against a fresh start from nothing to a converged
//! rollout, measured first as the positive control. Every kind but pods is listed only by the
//! operator's watches; pods, which no cache of ours holds, are read by reconciles. The watches'
//! LISTs (every kind but pods) may not exceed a fresh start's: each watch relists at most once,
//! no storm. The reconciles' pod reads may not exceed twice a fresh start's: a rollout round rolls
//! out before the restart, then (an outage past the renew deadline ends the leader's term) a new
//! term starts the reconcilers again on the warm caches, and the round's change rolls the device
//! plugin; a storm of reconciles (every relisted object waking every reconciler, as before
//! `core::cache::change_stream` handed out only what a relist changed) reads several times that.
//! The operator must also stay up: with `--leader-elect` an outage longer than its renew deadline
//! (8 s here) costs it the Lease — it stops writing and its reconcilers at once — and it takes the
//! Lease back in place as soon as the API answers (the Lease still names it). A process that
//! exited anyway is started again, as its Deployment would, and the round fails.

use std::{
    fmt::Write as _,
    time::{Duration, Instant},
};

use anyhow::bail;
use gpu_operator_api::{ClusterPolicy, ClusterPolicySpec};
use gpu_operator_harness::operator::{Operator, lists_in, writes_in};
use k8s_openapi::{
    api::{apps::v1::DaemonSet, coordination::v1::Lease},
    jiff::Timestamp,
};
use kube::{
    Api,
    api::{Patch, PatchParams, PostParams},
};
use serde_json::json;

use super::{
    kills::{NAMESPACE, POLICY, Target},
    steps::{
        LEASE, PLUGIN, converge, delete_everything, minimal_policy, wait_for_holder,
        wait_until_a_daemonset_exists,
    },
};
use crate::cluster::{self, Component, Layout};

/// How soon a ClusterPolicy change made after the restart must reach its DaemonSet.
pub const ACT_WITHIN: Duration = Duration::from_secs(10);
/// The env var of the device plugin the rounds' changes set.
const MARKER_ENV: &str = "CHAOS_RESTART_ROUND";
/// Quiet time after convergence before the write-counting window opens (as the kill cycles).
const SETTLE: Duration = Duration::from_secs(5);
/// The window in which a converged operator must not write.
const QUIET: Duration = Duration::from_secs(10);

/// One restart and what followed it.
#[derive(Clone, Debug, Default)]
pub struct Restart {
    /// `kube-apiserver` or `etcd`.
    pub component: &'static str,
    /// `idle` or `rollout`.
    pub during: &'static str,
    /// Seconds from the stop until the component was ready again.
    pub down_s: f64,
    /// Whether the operator exited (and was started again).
    pub operator_exited: bool,
    /// Seconds from the change (made as soon as the component was back) until its DaemonSet
    /// changed.
    pub acted_s: Option<f64>,
    /// Seconds from the component's return until `ready` with every DaemonSet rolled out.
    pub converged_s: Option<f64>,
    /// The operator's LISTs the API server served, from the restart until converged.
    pub lists: usize,
    /// [`Self::lists`] by resource, most first: what relisted, and what reconciles listed.
    pub lists_by_resource: Vec<(String, usize)>,
    /// Its LISTs refused in that time (403 while a restarted API server's authorizer fills its
    /// caches, 5xx while etcd is away): attempts retried with backoff, no list sent back.
    pub refused_lists: usize,
    /// What a fresh start needed (from nothing to a converged rollout).
    pub start_lists: usize,
    /// [`Self::start_lists`] by resource, most first.
    pub start_by_resource: Vec<(String, usize)>,
    /// Its writes (Leases aside) in the quiet window once converged, described.
    pub quiet_writes: Vec<String>,
    /// Why the round failed, when it did.
    pub error: Option<String>,
}

impl Restart {
    /// Whether every figure of the round is as it must be.
    pub fn passed(&self) -> bool {
        self.error.is_none()
            && !self.operator_exited
            && self.acted_s.is_some_and(|s| s <= ACT_WITHIN.as_secs_f64())
            && self.converged_s.is_some()
            && watch_lists(&self.lists_by_resource) <= watch_lists(&self.start_by_resource)
            && pod_reads(&self.lists_by_resource) <= 2 * pod_reads(&self.start_by_resource)
            && self.quiet_writes.is_empty()
    }
}

/// The LISTs of `by_resource` that the operator's watches make: every kind but pods (see the
/// module docs).
fn watch_lists(by_resource: &[(String, usize)]) -> usize {
    by_resource.iter().map(|(_, n)| n).sum::<usize>() - pod_reads(by_resource)
}

/// The LISTs of `by_resource` that reconciles make: those of pods.
fn pod_reads(by_resource: &[(String, usize)]) -> usize {
    by_resource
        .iter()
        .find(|(resource, _)| resource == "pods")
        .map_or(0, |(_, n)| *n)
}

/// Runs the four rounds (each component, idle and mid-rollout) on the cluster the failovers leave
/// (a converged ClusterPolicy, no operator running).
pub async fn run(layout: &Layout, target: &Target) -> anyhow::Result<Vec<Restart>> {
    let client = &target.client;
    // A fresh start from nothing is the bound on LISTs, and the proof the log shows them.
    delete_everything(client).await?;
    let since = Timestamp::now();
    let mut operator = target.start_as(&target.primary)?;
    let prefix = format!("{}_{:x}", target.primary.pod_name, operator.pid());
    wait_for_holder(client, |h| h.starts_with(&prefix)).await?;
    Box::pin(create_policy(client, minimal_policy()?.spec)).await?;
    converge(client, &mut operator, None).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let start = lists_in(&target.audit_log()?, &target.primary.user, since)?;
    let start_lists = start.len();
    let start_by_resource = count_by_resource(start.iter().map(|(_, list)| list));
    if start_lists == 0 {
        bail!(
            "the audit log shows no LIST by {} at its start: the LIST counts would be meaningless",
            target.primary.user
        );
    }
    let mut rounds = Vec::with_capacity(4);
    let mut change = 0;
    for component in [Component::Apiserver, Component::Etcd] {
        for during in ["idle", "rollout"] {
            let mut round = Restart {
                component: component.name(),
                during,
                start_lists,
                start_by_resource: start_by_resource.clone(),
                ..Restart::default()
            };
            let result = Box::pin(one(
                layout,
                target,
                &mut operator,
                (component, during, change),
                &mut round,
            ))
            .await;
            change += 1;
            if let Err(error) = result {
                round.error = Some(format!("{error:#}"));
            }
            eprintln!(
                "    {} restarted while {during}: {}",
                component.name(),
                if round.passed() {
                    "ok".to_owned()
                } else {
                    format!("FAILED {round:?}")
                }
            );
            rounds.push(round);
            if !operator.is_running() {
                operator = target.start_as(&target.primary)?;
            }
        }
    }
    operator.stop()?;
    Ok(rounds)
}

async fn one(
    layout: &Layout,
    target: &Target,
    operator: &mut Operator,
    (component, during, change): (Component, &str, usize),
    round: &mut Restart,
) -> anyhow::Result<()> {
    let client = &target.client;
    let since = Timestamp::now();
    if during == "rollout" {
        let spec = Api::<ClusterPolicy>::all(client.clone())
            .get(POLICY)
            .await?
            .spec;
        delete_everything(client).await?;
        Box::pin(create_policy(client, spec)).await?;
        // A moment into the rollout: the first DaemonSet is there, the rest are on their way.
        wait_until_a_daemonset_exists(client).await?;
    }
    let stopped = Instant::now();
    cluster::restart(layout, component).await?;
    round.down_s = stopped.elapsed().as_secs_f64();
    let back = Instant::now();
    let back_at = Timestamp::now();
    // The change, made as soon as the component is back: a change of the device plugin's
    // template that no earlier round or kill made.
    let value = format!("{change}-{}", since.as_second());
    let marker = json!({"spec": {"devicePlugin": {"env": [
        {"name": MARKER_ENV, "value": value}
    ]}}});
    while let Err(error) = Api::<ClusterPolicy>::all(client.clone())
        .patch(POLICY, &PatchParams::default(), &Patch::Merge(&marker))
        .await
    {
        // After an etcd restart the API server may take a moment to answer writes again.
        if back.elapsed() > Duration::from_secs(30) {
            bail!("the ClusterPolicy could not be patched within 30 s of the restart: {error}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let changed = Instant::now();
    // Acted on by whichever operator process leads: the one that lived through the restart, or
    // (when that one exited) the one started again in its place, as its Deployment would.
    while !plugin_has_env(client, &value).await {
        if !operator.is_running() {
            round.operator_exited = true;
            *operator = target.start_as(&target.primary)?;
        }
        if changed.elapsed() > Duration::from_secs(120) {
            bail!(
                "the change made after the restart did not reach the device plugin DaemonSet in 120 s; the operator's log ends:\n{}",
                operator.log_tail()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    round.acted_s = Some(changed.elapsed().as_secs_f64());
    // Either it renews its Lease now that the component is back, or it gave up (it exits).
    let prefix = format!("{}_{:x}", target.primary.pod_name, operator.pid());
    while operator.is_running() && !renewed_since(client, &prefix, back_at).await {
        if back.elapsed() > Duration::from_secs(120) {
            bail!("the operator neither renewed its Lease nor exited within 120 s of the restart");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    if !operator.is_running() {
        round.operator_exited = true;
        *operator = target.start_as(&target.primary)?;
    }
    converge(client, operator, None).await?;
    round.converged_s = Some(back.elapsed().as_secs_f64());
    let converged_at = Timestamp::now();
    tokio::time::sleep(SETTLE).await;
    let quiet_from = Timestamp::now();
    tokio::time::sleep(QUIET).await;
    let quiet_to = Timestamp::now();
    // The audit log's batch (1 s) reaches the file.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let log = target.audit_log()?;
    let lists: Vec<_> = lists_in(&log, &target.primary.user, since)?
        .into_iter()
        .filter(|(at, _)| *at <= converged_at)
        .map(|(_, list)| list)
        .collect();
    round.refused_lists = lists.iter().filter(|list| list.code >= 400).count();
    round.lists = lists.len() - round.refused_lists;
    round.lists_by_resource = count_by_resource(lists.iter().filter(|list| list.code < 400));
    round.quiet_writes = writes_in(&log, &target.primary.user, quiet_from)?
        .into_iter()
        .filter(|(at, w)| w.resource != "leases" && *at <= quiet_to)
        .map(|(_, w)| format!("{} {} {} ({})", w.verb, w.resource, w.name, w.code))
        .collect();
    Ok(())
}

/// How many of `lists` each resource had, most first.
fn count_by_resource<'a>(
    lists: impl Iterator<Item = &'a gpu_operator_harness::operator::Write>,
) -> Vec<(String, usize)> {
    let mut counts = std::collections::BTreeMap::<&str, usize>::new();
    for list in lists {
        *counts.entry(&list.resource).or_default() += 1;
    }
    let mut counts: Vec<_> = counts
        .into_iter()
        .map(|(resource, n)| (resource.to_owned(), n))
        .collect();
    counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    counts
}

/// Whether the device plugin DaemonSet's pod template sets [`MARKER_ENV`] to `value`.
async fn plugin_has_env(client: &kube::Client, value: &str) -> bool {
    let daemonset = Api::<DaemonSet>::namespaced(client.clone(), NAMESPACE)
        .get_opt(PLUGIN)
        .await
        .ok()
        .flatten();
    daemonset
        .and_then(|d| d.spec)
        .and_then(|s| s.template.spec)
        .is_some_and(|pod| {
            pod.containers.iter().any(|c| {
                c.env
                    .iter()
                    .flatten()
                    .any(|e| e.name == MARKER_ENV && e.value.as_deref() == Some(value))
            })
        })
}

/// Whether the Lease is held by `holder_prefix` and was renewed after `after`.
async fn renewed_since(client: &kube::Client, holder_prefix: &str, after: Timestamp) -> bool {
    let lease = Api::<Lease>::namespaced(client.clone(), NAMESPACE)
        .get_opt(LEASE)
        .await
        .ok()
        .flatten()
        .and_then(|l| l.spec);
    lease.is_some_and(|spec| {
        spec.holder_identity
            .is_some_and(|h| h.starts_with(holder_prefix))
            && spec.renew_time.is_some_and(|t| t.0 > after)
    })
}

async fn create_policy(client: &kube::Client, spec: ClusterPolicySpec) -> anyhow::Result<()> {
    Api::<ClusterPolicy>::all(client.clone())
        .create(&PostParams::default(), &ClusterPolicy::new(POLICY, spec))
        .await?;
    Ok(())
}

/// The rounds as a Markdown section.
pub fn markdown(rounds: &[Restart], out: &mut String) {
    out.push_str(
        "\n## Control plane restarted (stopped and started again with its data)\n\n\
         | component | during | down for | operator | change acted on after | converged after | LISTs served (start needs) | by watches (start) | pod reads (start) | LISTs refused | writes once converged |\n\
         |---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let secs = |s: Option<f64>| s.map_or_else(|| "**no**".to_owned(), |s| format!("{s:.1} s"));
    for r in rounds {
        let _ = writeln!(
            out,
            "| {} | {} | {:.1} s | {} | {} | {} | {} ({}) | {} ({}) | {} ({}) | {} | {} |",
            r.component,
            r.during,
            r.down_s,
            if r.operator_exited {
                "**exited**, restarted"
            } else {
                "stayed up"
            },
            secs(r.acted_s),
            secs(r.converged_s),
            r.lists,
            r.start_lists,
            watch_lists(&r.lists_by_resource),
            watch_lists(&r.start_by_resource),
            pod_reads(&r.lists_by_resource),
            pod_reads(&r.start_by_resource),
            r.refused_lists,
            r.quiet_writes.len(),
        );
    }
    let _ = writeln!(
        out,
        "\n**{} of {} restarts passed** (the operator stayed up, a change acted on within {} s, no \
         watch listing more than at a fresh start, at most twice a fresh start's pod reads, no write \
         once converged).",
        rounds.iter().filter(|r| r.passed()).count(),
        rounds.len(),
        ACT_WITHIN.as_secs(),
    );
    let by_resource = |counts: &[(String, usize)]| {
        counts
            .iter()
            .map(|(resource, n)| format!("{resource} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Some(first) = rounds.first() {
        let _ = writeln!(
            out,
            "\n- a fresh start: LISTs served by resource: {}",
            by_resource(&first.start_by_resource)
        );
    }
    for r in rounds {
        let _ = writeln!(
            out,
            "- {} while {}: LISTs served by resource: {}",
            r.component,
            r.during,
            by_resource(&r.lists_by_resource)
        );
    }
    for r in rounds {
        if let Some(error) = &r.error {
            let _ = writeln!(out, "\n{} while {} failed: {error}", r.component, r.during);
        }
        for write in &r.quiet_writes {
            let _ = writeln!(
                out,
                "\n- {} while {}: write once converged: {write}",
                r.component, r.during
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(pods: usize, per_watch: usize) -> Vec<(String, usize)> {
        let mut counts = vec![("pods".to_owned(), pods)];
        counts.extend(
            ["nodes", "daemonsets", "configmaps"]
                .iter()
                .map(|kind| ((*kind).to_owned(), per_watch)),
        );
        counts
    }

    fn round(pods: usize, per_watch: usize) -> Restart {
        // A fresh start: 3 watches listing twice each, 40 pod LISTs by reconciles.
        let start = counts(40, 2);
        let lists = counts(pods, per_watch);
        Restart {
            acted_s: Some(1.0),
            converged_s: Some(5.0),
            lists: lists.iter().map(|(_, n)| n).sum(),
            lists_by_resource: lists,
            start_lists: start.iter().map(|(_, n)| n).sum(),
            start_by_resource: start,
            ..Restart::default()
        }
    }

    #[test]
    fn watches_may_relist_once_and_reconciles_read_at_most_twice_a_fresh_starts_pods() {
        assert!(round(3, 2).passed(), "idle: every watch relisted once");
        assert!(
            round(80, 2).passed(),
            "a rollout before the restart, a new term after it"
        );
        assert!(!round(81, 2).passed(), "a storm of reconciles");
        assert!(
            !round(3, 3).passed(),
            "a watch listed more often than at a fresh start"
        );
    }
}
