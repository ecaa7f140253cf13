//! The state machine as a pure function: from the nodes' facts, the policy and the time, what
//! each node does next — the node patch (state label, cordon, annotations), the pods to evict or
//! delete, why it waits, and the Event to publish. [`crate::reconcile`] carries the steps out:
//! pod work first, then the node patch, so a node's label names the step whose work is pending
//! and an operator restart redoes at most that step (each step's work is idempotent: a gone pod
//! is not evicted twice, the driver pod is deleted by uid).
//!
//! Admission (`upgrade-required` → `cordon-required`) honours `maxParallelUpgrades` and
//! `maxUnavailable`, counting every node already unavailable: cordoned, NotReady, upgrading or
//! `upgrade-failed`. A node cordoned before its upgrade needs no `maxUnavailable` slot (it is
//! unavailable already) but still a parallel slot.

use std::{collections::BTreeMap, time::Duration};

use gpu_operator_api::labels;
use k8s_openapi::jiff::Timestamp;

use crate::{
    facts::{NodeFacts, Workload},
    gpu_clients,
    policy::Policy,
    state::{RESTART_POD, STATE_SINCE, UpgradeState},
    transitions::{
        failed, move_to, move_to_restart, needs_restart, needs_upgrade, remove, required, restart,
        skipped, uncordon, validate, wait_for_jobs,
    },
};

/// How often a node that waits on pods outside the watched caches (jobs, evictions) is looked at.
pub const POLL: Duration = Duration::from_secs(5);

/// The change of a node's state label.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StateLabel {
    /// Leave it.
    #[default]
    Keep,
    /// Set it.
    Set(UpgradeState),
    /// Remove it.
    Remove,
}

/// One merge patch of a node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodePatch {
    /// The state label.
    pub state: StateLabel,
    /// `spec.unschedulable`, when it changes.
    pub unschedulable: Option<bool>,
    /// Annotations to set (`Some`) or remove (`None`).
    pub annotations: BTreeMap<&'static str, Option<String>>,
    /// The new value of `nvidia.com/gpu.deploy.client`, when it changes: paused while GPU users
    /// leave, `true` again when the upgrade ends.
    pub client: Option<&'static str>,
}

impl NodePatch {
    fn is_empty(&self) -> bool {
        self.state == StateLabel::Keep
            && self.unschedulable.is_none()
            && self.annotations.is_empty()
            && self.client.is_none()
    }
}

/// Why a node stays where it is, and when to look again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wait {
    /// What it waits for, said for the condition and `upgrade status`.
    pub reason: String,
    /// Look again after this long; `None`: a watched change (a pod, the node) wakes it.
    pub recheck: Option<Duration>,
    /// It waits on something that may never come (a PDB, a job, a validator): named as stuck.
    pub stuck: bool,
}

/// An Event about a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeEvent {
    /// Warning (failed) or Normal.
    pub warning: bool,
    /// `DriverUpgradeStarted`, `DriverUpgradeFailed`, `DriverUpgradeDone`.
    pub reason: &'static str,
    /// The sentence.
    pub note: String,
}

/// What one node does in this pass.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Step {
    /// The node.
    pub node: String,
    /// Its patch; empty when nothing changes.
    pub patch: NodePatch,
    /// Pods to evict (`namespace/name`), through the Eviction API.
    pub evict: Vec<(String, String)>,
    /// Operator-namespace pods to delete (name, uid): the driver pod, the stale validator pod.
    pub delete: Vec<(String, String)>,
    /// Why it waits, if it does.
    pub wait: Option<Wait>,
    /// The Event to publish once the patch is written.
    pub event: Option<NodeEvent>,
}

impl Step {
    /// Whether the step writes anything.
    pub fn writes(&self) -> bool {
        !self.patch.is_empty() || !self.evict.is_empty() || !self.delete.is_empty()
    }
}

/// The names of the nodes admitted from `upgrade-required` (and retried from `upgrade-failed` at
/// a user's request) in this pass, in name order.
pub fn admit(nodes: &[NodeFacts], policy: &Policy) -> Vec<String> {
    let (mut parallel, mut room) = slots(nodes, policy);
    let mut candidates: Vec<&NodeFacts> = nodes
        .iter()
        .filter(|n| !n.skip)
        .filter(|n| match n.state {
            Some(UpgradeState::Required) => needs_restart(n),
            Some(UpgradeState::Failed) => n.requested,
            _ => false,
        })
        .collect();
    candidates.sort_by(|a, b| a.name.cmp(&b.name));
    let mut admitted = Vec::new();
    for node in candidates {
        if parallel == 0 {
            break;
        }
        if !unavailable(node) {
            if room == 0 {
                continue;
            }
            room -= 1;
        }
        parallel -= 1;
        admitted.push(node.name.clone());
    }
    admitted
}

/// The parallel slots and the unavailable nodes left before this pass admits any.
fn slots(nodes: &[NodeFacts], policy: &Policy) -> (usize, usize) {
    let in_progress = nodes
        .iter()
        .filter(|n| n.state.is_some_and(UpgradeState::in_progress))
        .count();
    let unavailable = nodes.iter().filter(|n| unavailable(n)).count();
    let parallel = if policy.max_parallel == 0 {
        usize::MAX
    } else {
        policy.max_parallel.saturating_sub(in_progress)
    };
    (
        parallel,
        policy
            .max_unavailable(nodes.len())
            .saturating_sub(unavailable),
    )
}

/// How many more nodes could start an upgrade before this pass admits any (NVIDIA's
/// `upgrades_available`).
pub fn available(nodes: &[NodeFacts], policy: &Policy) -> usize {
    let (parallel, room) = slots(nodes, policy);
    parallel.min(room)
}

/// Whether `node` is out of service already: cordoned, NotReady, upgrading or failed.
fn unavailable(node: &NodeFacts) -> bool {
    node.unschedulable
        || !node.ready
        || node
            .state
            .is_some_and(|s| s.in_progress() || s == UpgradeState::Failed)
}

/// The step of `node`. `admitted`: it won a slot in [`admit`]. `workloads`: the pods on the node,
/// listed for the states that evict or wait on them.
pub fn step(
    node: &NodeFacts,
    policy: &Policy,
    admitted: bool,
    workloads: &[Workload],
    now: Timestamp,
) -> Step {
    let mut step = Step {
        node: node.name.clone(),
        ..Step::default()
    };
    let elapsed = node.since.map_or(Duration::ZERO, |since| {
        Duration::try_from(now.duration_since(since)).unwrap_or_default()
    });
    // A skipped node is never touched, unless it was upgrading when the label came: it finishes.
    if node.skip && !node.state.is_some_and(UpgradeState::in_progress) {
        if needs_upgrade(node) {
            step.wait = Some(skipped());
        }
        return step;
    }
    let Some(state) = node.state else {
        if node.driver.is_some() {
            let next = if needs_restart(node) {
                UpgradeState::Required
            } else {
                UpgradeState::Done
            };
            move_to(&mut step, next, now);
        }
        return finish(node, step, now);
    };
    match state {
        UpgradeState::Done => {
            if needs_restart(node) {
                move_to(&mut step, UpgradeState::Required, now);
            }
        }
        UpgradeState::Required => required(node, admitted, &mut step, now),
        UpgradeState::CordonRequired => {
            // Without `waitForCompletion.podSelector` there are no jobs to wait for: the node
            // goes past `wait-for-jobs-required` in the patch that cordons it, as it goes past
            // `drain-required` with drain off (one node patch less; it would never wait there).
            let next = if policy.wait_selector.is_some() {
                UpgradeState::WaitForJobsRequired
            } else {
                UpgradeState::PodDeletionRequired
            };
            move_to(&mut step, next, now);
            step.patch.unschedulable = (!node.unschedulable).then_some(true);
        }
        UpgradeState::WaitForJobsRequired => {
            wait_for_jobs(policy, workloads, elapsed, &mut step, now);
        }
        UpgradeState::PodDeletionRequired => {
            gpu_clients::pod_deletion(node, policy, workloads, elapsed, &mut step, now);
        }
        UpgradeState::DrainRequired => match &policy.drain {
            None => move_to_restart(node, &mut step, now),
            Some(drain) => {
                let drained: Vec<&Workload> = workloads
                    .iter()
                    .filter(|w| {
                        !w.daemonset
                            && !w.mirror
                            && !w.finished
                            && drain.selector.matches(&w.labels)
                    })
                    .collect();
                remove(
                    node,
                    &drained,
                    &drain.removal,
                    "drain",
                    "pod",
                    UpgradeState::PodRestartRequired,
                    elapsed,
                    &mut step,
                    now,
                );
            }
        },
        UpgradeState::PodRestartRequired => restart(node, elapsed, &mut step, now),
        UpgradeState::ValidationRequired => validate(node, elapsed, &mut step, now),
        UpgradeState::UncordonRequired => uncordon(node, &mut step, now),
        UpgradeState::Failed => failed(node, admitted, &mut step, now),
    }
    finish(node, step, now)
}

/// Adds what every patch of a managed node carries: the time a state without one was entered,
/// and the annotation that tells NVIDIA's driver manager the operator handles eviction.
fn finish(node: &NodeFacts, mut step: Step, now: Timestamp) -> Step {
    let managed = node.state.is_some() || step.patch.state != StateLabel::Keep;
    if managed && node.since.is_none() && !step.patch.annotations.contains_key(STATE_SINCE) {
        step.patch
            .annotations
            .insert(STATE_SINCE, Some(now.to_string()));
    }
    if managed && !node.upgrade_enabled {
        step.patch
            .annotations
            .insert(labels::DRIVER_UPGRADE_ENABLED, Some("true".to_owned()));
    }
    step
}

/// The patch that hands a node back when automatic upgrades are off: no state label, none of our
/// annotations (NVIDIA removes the label too). `None` when there is nothing to remove.
pub fn release(node: &NodeFacts) -> Option<NodePatch> {
    let mut patch = NodePatch::default();
    if node.state.is_some() {
        patch.state = StateLabel::Remove;
    }
    gpu_clients::resume(node, &mut patch);
    for (present, key) in [
        (node.since.is_some(), STATE_SINCE),
        (node.upgrade_enabled, labels::DRIVER_UPGRADE_ENABLED),
        (node.restart_pod.is_some(), RESTART_POD),
    ] {
        if present {
            patch.annotations.insert(key, None);
        }
    }
    (!patch.is_empty()).then_some(patch)
}

#[cfg(test)]
mod tests;
