//! Scenario "leader failover": two operator processes with `--leader-elect`, each under a
//! ServiceAccount of its own (so the audit log tells their requests apart); the leader is
//! SIGKILLed at a random moment of a full-stack rollout. The standby must take the Lease within
//! the Lease duration (the seconds are reported), finish the rollout, and at no time may both
//! write: the standby writes nothing (Leases aside) before it holds the Lease, and the dead
//! leader's last write precedes the standby's first.

use std::time::{Duration, Instant};

use anyhow::bail;
use gpu_operator_api::ClusterPolicy;
use gpu_operator_harness::operator::writes_in;
use k8s_openapi::jiff::Timestamp;
use kube::{Api, api::PostParams};

use super::{
    Rng,
    kills::{Candidate, LEASE_DURATION, Target},
    steps::{
        converge, delete_everything, minimal_policy, sigkill, wait_for_holder,
        wait_until_a_daemonset_exists,
    },
};

/// One failover and its figures.
#[derive(Clone, Debug, Default)]
pub struct Failover {
    /// Seconds into the rollout at which the leader was killed.
    pub killed_after_s: f64,
    /// Seconds from the kill until the standby held the Lease.
    pub takeover_s: Option<f64>,
    /// Seconds from the kill until the rollout was complete.
    pub converged_s: Option<f64>,
    /// Writes (Leases aside) the standby made before it held the Lease.
    pub standby_writes_before: usize,
    /// Writes (Leases aside) of the dead leader that completed after the standby's first write.
    pub overlapping_writes: usize,
    /// Writes (Leases aside) each made in the round: leader, standby (the positive control).
    pub writes: (usize, usize),
    /// Why the round failed, when it did.
    pub error: Option<String>,
}

impl Failover {
    /// Whether the round's figures are as they must be.
    pub fn passed(&self) -> bool {
        self.error.is_none()
            // A standby retries every 2 s: it takes an expired Lease within a Lease duration and
            // a retry period, plus 3 s for a loaded 2-core machine (as e2e/tests/leader_election.rs).
            && self
                .takeover_s
                .is_some_and(|s| s <= LEASE_DURATION.as_secs_f64() + 2.0 + 3.0)
            && self.converged_s.is_some()
            && self.standby_writes_before == 0
            && self.overlapping_writes == 0
    }
}

/// Runs `rounds` failovers on the cluster the kill cycles leave (the primary stopped).
pub async fn run(target: &Target, rounds: usize, rng: &mut Rng) -> Vec<Failover> {
    let mut results = Vec::with_capacity(rounds);
    for round in 0..rounds {
        let mut failover = Failover::default();
        if let Err(error) = one(target, rng, &mut failover).await {
            failover.error = Some(format!("{error:#}"));
        }
        eprintln!(
            "    failover {}/{rounds}: {}",
            round + 1,
            if failover.passed() {
                "ok".to_owned()
            } else {
                format!("FAILED {failover:?}")
            }
        );
        results.push(failover);
    }
    results
}

async fn one(target: &Target, rng: &mut Rng, failover: &mut Failover) -> anyhow::Result<()> {
    let client = &target.client;
    // From nothing: no policy, no operands, no Lease holder alive.
    delete_everything(client).await.ok();
    let first = target.start_as(&target.primary)?;
    let second = target.start_as(&target.standby)?;
    let holder = wait_for_holder(client, |_| true).await?;
    let leader_name = holder
        .split_once('_')
        .map_or(holder.as_str(), |(name, _)| name);
    let ((leader, mut leader_process), (standby, mut standby_process)) =
        if leader_name == target.primary.pod_name {
            ((&target.primary, first), (&target.standby, second))
        } else {
            ((&target.standby, second), (&target.primary, first))
        };
    let policy = minimal_policy()?;
    let since = Timestamp::now();
    let created = Instant::now();
    Api::<ClusterPolicy>::all(client.clone())
        .create(&PostParams::default(), &policy)
        .await?;
    // Mid-rollout for certain: a random moment of the first second after the leader created its
    // first DaemonSet (the small fleet's rollout is done within seconds of that).
    wait_until_a_daemonset_exists(client).await?;
    tokio::time::sleep(Duration::from_secs(1).mul_f64(rng.unit())).await;
    failover.killed_after_s = created.elapsed().as_secs_f64();
    sigkill(&mut leader_process)?;
    let killed = Instant::now();
    let prefix = format!("{}_", standby.pod_name);
    wait_for_holder(client, |h| h.starts_with(&prefix)).await?;
    let took_over_at = Timestamp::now();
    failover.takeover_s = Some(killed.elapsed().as_secs_f64());
    converge(client, &mut standby_process, None).await?;
    failover.converged_s = Some(killed.elapsed().as_secs_f64());
    // The audit log's batch (1 s) reaches the file.
    tokio::time::sleep(Duration::from_secs(2)).await;
    count_writes(target, (leader, standby), since, took_over_at, failover)?;
    standby_process.stop()?;
    Ok(())
}

/// Splits the round's writes by who made them and when.
fn count_writes(
    target: &Target,
    (leader, standby): (&Candidate, &Candidate),
    since: Timestamp,
    took_over_at: Timestamp,
    failover: &mut Failover,
) -> anyhow::Result<()> {
    let log = target.audit_log()?;
    let not_lease = |writes: Vec<(Timestamp, gpu_operator_harness::operator::Write)>| {
        writes
            .into_iter()
            .filter(|(_, w)| w.resource != "leases")
            .map(|(at, _)| at)
            .collect::<Vec<_>>()
    };
    let leader_writes = not_lease(writes_in(&log, &leader.user, since)?);
    let standby_all = writes_in(&log, &standby.user, since)?;
    // When the standby took the Lease, by the API server's clock: its first Lease write (a
    // standby only reads the Lease until it expires); else when the poll saw it.
    let took_over_at = standby_all
        .iter()
        .find(|(_, w)| w.resource == "leases")
        .map_or(took_over_at, |(at, _)| *at);
    let standby_writes = not_lease(standby_all);
    failover.writes = (leader_writes.len(), standby_writes.len());
    failover.standby_writes_before = standby_writes
        .iter()
        .filter(|&&at| at < took_over_at)
        .count();
    if let Some(&first_standby) = standby_writes.first() {
        failover.overlapping_writes = leader_writes
            .iter()
            .filter(|&&at| at >= first_standby)
            .count();
    }
    // The positive control: the log shows this round's writes (a wrong user name or audit policy
    // would make "no overlap" pass vacuously).
    if leader_writes.is_empty() && standby_writes.is_empty() {
        bail!(
            "the audit log shows no write by {} or {}: the counts would be meaningless",
            leader.user,
            standby.user
        );
    }
    Ok(())
}
