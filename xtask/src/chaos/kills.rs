//! Scenario "operator killed": the operator (a host process with `--leader-elect`, under a
//! ServiceAccount of its own) is SIGKILLed at a random moment of a full-stack rollout or of a
//! `mig.strategy` / `devicePlugin.config` change, and started again at once. Each time it must
//! converge (`ready`, every DaemonSet rolled out, the change applied); leave exactly the labelled
//! objects an uninterrupted run leaves for the same ClusterPolicy (the control pass, run first);
//! replace no operand pod whose DaemonSet did not change; update no DaemonSet more than the
//! change needs; and make no write in a quiet window once converged (the audit log).

use std::{
    collections::{BTreeMap, BTreeSet},
    path::PathBuf,
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};
use gpu_operator_api::ClusterPolicy;
use gpu_operator_harness::operator::{IMAGES, Operator, audit_log_beside, writes_in};
use k8s_openapi::jiff::Timestamp;
use kube::{
    Api,
    api::{ObjectMeta, PostParams},
};

use super::{
    Rng, snapshot,
    steps::{
        apply_change, converge, delete_everything, minimal_policy, plugin_generation, sigkill,
        wait_for_holder,
    },
};
use crate::bench::patches;

/// The operator's leader-election timing: an 8 s renew deadline makes a 13 s Lease. (A 3 s
/// deadline lost the Lease mid-rollout on a loaded 2-core machine: the operator then exits, as it
/// must, rather than risk a second writer.)
const LEASE_FLAG: &str = "--leader-lease-renew-deadline=8s";
/// The Lease duration [`LEASE_FLAG`] gives.
pub const LEASE_DURATION: Duration = Duration::from_secs(13);
/// Namespace of the operator and its operands.
pub const NAMESPACE: &str = "gpu-operator";
/// The ClusterPolicy's name.
pub const POLICY: &str = "cluster-policy";
/// Quiet time after convergence before the write-counting window opens: longer than the
/// operator's status debounce, so trailing condition writes of the convergence are not counted.
const SETTLE: Duration = Duration::from_secs(5);
/// The window in which a converged operator must not write.
const QUIET: Duration = Duration::from_secs(10);
/// The changes of the series that differ (it repeats after four).
const DISTINCT_CHANGES: usize = 4;

/// What a kill cycle did to the ClusterPolicy before the kill.
#[derive(Clone, Debug)]
pub enum Action {
    /// Deleted it, waited until everything of ours was gone, and created it again.
    Rollout,
    /// Patched it (what the patch changes).
    Change(String),
}

/// One kill and what followed it.
#[derive(Clone, Debug, Default)]
pub struct Cycle {
    /// What was under way when the operator was killed.
    pub action: String,
    /// Seconds between the action and the SIGKILL.
    pub killed_after_s: f64,
    /// Seconds from the restart until converged (`None`: it did not).
    pub converged_s: Option<f64>,
    /// Labelled objects the control run does not have for this ClusterPolicy (orphans,
    /// duplicates), and objects it has that are missing.
    pub extra: Vec<String>,
    /// See [`Self::extra`].
    pub missing: Vec<String>,
    /// Operand pods replaced although their DaemonSet did not change after the kill.
    pub pods_replaced: usize,
    /// DaemonSet spec updates beyond the one the change needs.
    pub extra_updates: i64,
    /// The operator's writes (Leases aside) from the action until converged.
    pub writes_to_converge: usize,
    /// Its writes (Leases aside) in the quiet window once converged, described.
    pub quiet_writes: Vec<String>,
    /// Why the cycle failed, when it did.
    pub error: Option<String>,
}

impl Cycle {
    /// Whether every figure of the cycle is as it must be.
    pub fn passed(&self) -> bool {
        self.error.is_none()
            && self.converged_s.is_some()
            && self.extra.is_empty()
            && self.missing.is_empty()
            && self.pods_replaced == 0
            && self.extra_updates == 0
            && self.quiet_writes.is_empty()
    }
}

/// One operator process's identity: its ServiceAccount's kubeconfig, its user name in the audit
/// log, its `POD_NAME` (the Lease holder's prefix) and its log.
pub struct Candidate {
    /// Its kubeconfig (a token of its own ServiceAccount).
    pub kubeconfig: PathBuf,
    /// Its user name in the audit log.
    pub user: String,
    /// Its `POD_NAME`: the Lease holder identity starts with it.
    pub pod_name: &'static str,
    /// Where its output goes.
    pub log: PathBuf,
}

/// The operator under chaos and what it runs against.
pub struct Target {
    /// Admin client.
    pub client: kube::Client,
    /// The admin kubeconfig (the audit log is beside it).
    pub admin_kubeconfig: PathBuf,
    /// The `gpu-operator` binary.
    pub binary: PathBuf,
    /// The operator the kill cycles run, and the first candidate of the failover.
    pub primary: Candidate,
    /// The second candidate of the failover, under a ServiceAccount of its own.
    pub standby: Candidate,
}

impl Target {
    /// Starts the primary operator.
    fn start(&self) -> anyhow::Result<Operator> {
        self.start_as(&self.primary)
    }

    /// Starts `candidate` as production runs the operator (leader election on), with a short
    /// Lease so a restart after a SIGKILL waits 13 s, not the default 15 s, for the dead holder's
    /// Lease.
    pub fn start_as(&self, candidate: &Candidate) -> anyhow::Result<Operator> {
        let args = [
            "run",
            "--leader-elect",
            LEASE_FLAG,
            "--log-level=info",
            "--kubeconfig={kubeconfig}",
            "--health-probe-bind-address=127.0.0.1:{probe_port}",
            "--metrics-bind-address=127.0.0.1:{metrics_port}",
        ]
        .map(str::to_owned);
        let env: Vec<(&str, &str)> = IMAGES
            .into_iter()
            .chain([("POD_NAME", candidate.pod_name)])
            .collect();
        Operator::spawn_args(
            &self.binary,
            &args,
            &candidate.kubeconfig,
            NAMESPACE,
            &env,
            &candidate.log,
        )
    }

    /// The API server's audit log.
    pub fn audit_log(&self) -> anyhow::Result<PathBuf> {
        audit_log_beside(&self.admin_kubeconfig)
    }
}

/// The control pass's results: the labelled objects for each ClusterPolicy of the series, the
/// DaemonSet generations a rollout ends with, and how long a rollout and a change took.
struct Control {
    objects: BTreeMap<usize, BTreeSet<String>>,
    rollout_generations: BTreeMap<String, i64>,
    rollout: Duration,
    change: Duration,
}

/// Runs the control pass and then `kills` kill cycles; returns the cycles.
pub async fn run(target: &Target, kills: usize, rng: &mut Rng) -> anyhow::Result<Vec<Cycle>> {
    let mut operator = target.start()?;
    eprintln!("==> chaos: control pass (no kills)");
    let control = control(target, &mut operator).await?;
    eprintln!(
        "    rollout {:.1} s, change {:.1} s; {} labelled objects",
        control.rollout.as_secs_f64(),
        control.change.as_secs_f64(),
        control.objects.values().next().map_or(0, BTreeSet::len)
    );
    let mut cycles = Vec::with_capacity(kills);
    let mut patch = DISTINCT_CHANGES;
    for k in 0..kills {
        let action = if k % 3 == 0 {
            Action::Rollout
        } else {
            patch += 1;
            Action::Change(patches::patch(patch - 1).1)
        };
        let state = (patch - 1) % DISTINCT_CHANGES;
        let mut cycle = Cycle {
            action: match &action {
                Action::Rollout => "full-stack rollout".to_owned(),
                Action::Change(what) => what.clone(),
            },
            ..Cycle::default()
        };
        let result = Box::pin(kill_cycle(
            target,
            &mut operator,
            &control,
            (&action, patch - 1, state),
            rng,
            &mut cycle,
        ))
        .await;
        if let Err(error) = result {
            cycle.error = Some(format!("{error:#}"));
        }
        eprintln!(
            "    kill {:>2}/{kills} during {}: {}",
            k + 1,
            cycle.action,
            if cycle.passed() {
                "ok".to_owned()
            } else {
                format!("FAILED {cycle:?}")
            }
        );
        cycles.push(cycle);
        if !operator.is_running() {
            // A failed cycle may leave it dead: the next one needs it running.
            operator = target.start()?;
        }
    }
    operator.stop()?;
    Ok(cycles)
}

/// The series without kills: a rollout, then each distinct change; records what an
/// uninterrupted operator leaves.
async fn control(target: &Target, operator: &mut Operator) -> anyhow::Result<Control> {
    let client = &target.client;
    let policy = minimal_policy()?;
    // The first install races the node labeller: which GPU nodes carry `gpu.present` when the
    // driver first renders decides whether the first OS keeps the plain DaemonSet name. Every
    // rollout of the kill cycles starts from labelled nodes, so the control records its second.
    Api::<ClusterPolicy>::all(client.clone())
        .create(&PostParams::default(), &policy)
        .await?;
    converge(client, operator, None).await?;
    delete_everything(client).await?;
    let since = Timestamp::now();
    let started = Instant::now();
    Api::<ClusterPolicy>::all(client.clone())
        .create(&PostParams::default(), &policy)
        .await?;
    converge(client, operator, None).await?;
    let rollout = started.elapsed();
    tokio::time::sleep(SETTLE).await;
    let rollout_generations = snapshot::generations(client, NAMESPACE).await?;
    let writes = writes_in(&target.audit_log()?, &target.primary.user, since)?;
    // The positive control of every write count that follows: the audit log shows this user's
    // rollout (a wrong user name or audit policy would make "no writes" pass vacuously).
    if !writes.iter().any(|(_, w)| w.resource == "daemonsets") {
        bail!(
            "the audit log shows no DaemonSet write by {} during the control rollout: the write counts would be meaningless",
            target.primary.user
        );
    }
    let mut objects = BTreeMap::new();
    let mut change = Duration::ZERO;
    for i in 0..DISTINCT_CHANGES {
        let before = plugin_generation(client).await?;
        let started = Instant::now();
        apply_change(client, i).await?;
        converge(client, operator, Some(before)).await?;
        change = change.max(started.elapsed());
        tokio::time::sleep(SETTLE).await;
        objects.insert(i, snapshot::labelled_objects(client).await?);
    }
    Ok(Control {
        objects,
        rollout_generations,
        rollout,
        change,
    })
}

/// One cycle: the action, a SIGKILL a random moment into it, a restart, and the checks.
async fn kill_cycle(
    target: &Target,
    operator: &mut Operator,
    control: &Control,
    (action, patch, state): (&Action, usize, usize),
    rng: &mut Rng,
    cycle: &mut Cycle,
) -> anyhow::Result<()> {
    let client = &target.client;
    let generations_before = snapshot::generations(client, NAMESPACE).await?;
    let plugin_before = plugin_generation(client).await?;
    let (since, acted, window) = match action {
        Action::Rollout => {
            let spec = Api::<ClusterPolicy>::all(client.clone())
                .get(POLICY)
                .await?
                .spec;
            delete_everything(client).await?;
            let since = Timestamp::now();
            let acted = Instant::now();
            let policy = ClusterPolicy {
                metadata: ObjectMeta {
                    name: Some(POLICY.to_owned()),
                    ..ObjectMeta::default()
                },
                spec,
                status: None,
            };
            Api::<ClusterPolicy>::all(client.clone())
                .create(&PostParams::default(), &policy)
                .await?;
            (since, acted, control.rollout)
        }
        Action::Change(_) => {
            let since = Timestamp::now();
            let acted = Instant::now();
            apply_change(client, patch).await?;
            (since, acted, control.change)
        }
    };
    let delay = window.mul_f64(rng.unit());
    tokio::time::sleep(delay.saturating_sub(acted.elapsed())).await;
    cycle.killed_after_s = acted.elapsed().as_secs_f64();
    sigkill(operator)?;
    let generations_at_kill = snapshot::generations(client, NAMESPACE).await?;
    let pods_at_kill = snapshot::pods(client, NAMESPACE).await?;
    *operator = target.start()?;
    let restarted = Instant::now();
    // Converged means converged by the new process: it must hold the Lease first (its identity
    // is the pod name, then its pid in hex).
    let prefix = format!("{}_{:x}", target.primary.pod_name, operator.pid());
    wait_for_holder(client, |h| h.starts_with(&prefix)).await?;
    let plugin_floor = matches!(action, Action::Change(_)).then_some(plugin_before);
    converge(client, operator, plugin_floor).await?;
    cycle.converged_s = Some(restarted.elapsed().as_secs_f64());
    tokio::time::sleep(SETTLE).await;
    let quiet_from = Timestamp::now();
    tokio::time::sleep(QUIET).await;
    let quiet_to = Timestamp::now();

    let objects = snapshot::labelled_objects(client).await?;
    let reference = control
        .objects
        .get(&state)
        .context("no control snapshot for this ClusterPolicy")?;
    cycle.extra = objects.difference(reference).cloned().collect();
    cycle.missing = reference.difference(&objects).cloned().collect();
    let generations_after = snapshot::generations(client, NAMESPACE).await?;
    let pods_after = snapshot::pods(client, NAMESPACE).await?;
    if pods_after.is_empty() {
        bail!(
            "no operand pod carries {}: the pod check would pass vacuously",
            snapshot::OURS
        );
    }
    cycle.pods_replaced = snapshot::pods_replaced_without_cause(
        &pods_at_kill,
        &pods_after,
        &generations_at_kill,
        &generations_after,
    );
    cycle.extra_updates = extra_updates(
        action,
        &generations_before,
        &generations_at_kill,
        &generations_after,
        &control.rollout_generations,
    );
    // Give the audit log's batch (1 s) time to reach the file.
    tokio::time::sleep(Duration::from_secs(2)).await;
    for (at, write) in writes_in(&target.audit_log()?, &target.primary.user, since)? {
        if write.resource == "leases" || at > quiet_to {
            continue;
        }
        if at <= quiet_from {
            cycle.writes_to_converge += 1;
        } else {
            cycle.quiet_writes.push(format!(
                "{} {} {} ({})",
                write.verb, write.resource, write.name, write.code
            ));
        }
    }
    Ok(())
}

/// DaemonSet updates the restarted operator made beyond what the action needs: after a change,
/// one per DaemonSet that had not been updated yet when the operator died, none for one that
/// had; after a rollout, a DaemonSet ends at the generation the control rollout ended at.
fn extra_updates(
    action: &Action,
    before: &BTreeMap<String, i64>,
    at_kill: &BTreeMap<String, i64>,
    after: &BTreeMap<String, i64>,
    rollout: &BTreeMap<String, i64>,
) -> i64 {
    after
        .iter()
        .map(|(name, &generation)| match action {
            Action::Rollout => (generation - rollout.get(name).copied().unwrap_or(1)).max(0),
            Action::Change(_) => {
                let killed_at = at_kill.get(name).copied().unwrap_or(generation);
                let allowed = i64::from(before.get(name).is_none_or(|&b| killed_at <= b));
                (generation - killed_at - allowed).max(0)
            }
        })
        .sum()
}
