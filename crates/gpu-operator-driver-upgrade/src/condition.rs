//! The `DriverUpgrade` condition and the upgrade gauges from one pass of the state machine: GPU
//! nodes on the current driver out of all, nodes per state, the first stuck and failed nodes with
//! their reason, and how long the upgrade has run (in minutes, so the message does not change on
//! every pass).

use std::{collections::BTreeMap, time::Duration};

use gpu_operator_api::conditions::DRIVER_UPGRADE;
use gpu_operator_core::report::{
    conditions::Desired, metrics::DriverUpgrades, problems::PROBLEM_NODES,
};
use k8s_openapi::jiff::Timestamp;

use crate::{
    facts::NodeFacts,
    plan::{StateLabel, Step},
    state::UpgradeState,
};

/// What one pass saw, counted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Managed GPU nodes.
    pub total: usize,
    /// Nodes whose driver pod is in sync.
    pub current: usize,
    /// Nodes per state, after this pass's transitions.
    pub by_state: BTreeMap<UpgradeState, usize>,
    /// Nodes that need an upgrade but carry the skip label.
    pub skipped: usize,
    /// The first stuck nodes with the reason.
    pub stuck: Vec<String>,
    /// The first failed nodes with the reason.
    pub failed: Vec<String>,
    /// Since when nodes have been waiting or upgrading.
    pub started: Option<Timestamp>,
    /// How many more nodes could start now.
    pub available: usize,
    /// The pools whose upgrade policy cannot be followed (their nodes are left alone), with why.
    pub invalid: Vec<String>,
    /// Driver pods on the desired driver from an older template (restarted in place in turn).
    pub older_template: usize,
    /// The first nodes of those.
    pub older_template_nodes: Vec<String>,
}

impl Summary {
    /// Counts `nodes` with the `steps` of this pass (one per node, same order).
    pub fn of(nodes: &[NodeFacts], steps: &[Step], available: usize) -> Self {
        let mut summary = Self {
            total: nodes.len(),
            available,
            ..Self::default()
        };
        for (node, step) in nodes.iter().zip(steps) {
            let state = match step.patch.state {
                StateLabel::Set(s) => Some(s),
                StateLabel::Remove => None,
                StateLabel::Keep => node.state,
            };
            if node
                .driver
                .as_ref()
                .is_some_and(|d| d.in_sync && !d.terminating)
            {
                summary.current += 1;
            }
            if node
                .driver
                .as_ref()
                .is_some_and(|d| d.in_sync && d.older_template && !d.terminating)
            {
                summary.older_template += 1;
                if summary.older_template_nodes.len() < PROBLEM_NODES {
                    summary.older_template_nodes.push(node.name.clone());
                }
            }
            if let Some(state) = state {
                *summary.by_state.entry(state).or_default() += 1;
                if state != UpgradeState::Done
                    && let Some(since) = node.since
                {
                    summary.started = Some(summary.started.map_or(since, |s| s.min(since)));
                }
            }
            let Some(wait) = &step.wait else { continue };
            if node.skip
                && !state.is_some_and(UpgradeState::in_progress)
                && state != Some(UpgradeState::Failed)
            {
                summary.skipped += 1;
            } else if state == Some(UpgradeState::Failed) {
                if summary.failed.len() < PROBLEM_NODES {
                    let why = node.failure.clone().or_else(|| {
                        wait.reason
                            .strip_prefix("upgrade failed: ")
                            .map(str::to_owned)
                    });
                    summary
                        .failed
                        .push(format!("{} ({})", node.name, why.unwrap_or_default()));
                }
            } else if wait.stuck && summary.stuck.len() < PROBLEM_NODES {
                summary
                    .stuck
                    .push(format!("{} ({})", node.name, wait.reason));
            }
        }
        summary
    }

    fn count(&self, state: UpgradeState) -> usize {
        self.by_state.get(&state).copied().unwrap_or_default()
    }

    /// The gauges.
    pub fn gauges(&self, auto_upgrade: bool) -> DriverUpgrades {
        DriverUpgrades {
            auto_upgrade,
            in_progress: self
                .by_state
                .iter()
                .filter(|(s, _)| s.in_progress())
                .map(|(_, n)| n)
                .sum(),
            done: self.count(UpgradeState::Done),
            failed: self.count(UpgradeState::Failed),
            available: self.available,
            pending: self.count(UpgradeState::Required),
            by_state: UpgradeState::ALL
                .iter()
                .map(|s| (s.as_str(), self.count(*s)))
                .collect(),
            older_template: self.older_template,
        }
    }

    /// The condition, at time `now`.
    pub fn condition(&self, now: Timestamp) -> Desired {
        let mut parts = vec![format!(
            "{}/{} GPU nodes on the current driver",
            self.current, self.total
        )];
        let states: Vec<String> = self
            .by_state
            .iter()
            .filter(|(s, _)| **s != UpgradeState::Done)
            .map(|(s, n)| format!("{s} {n}"))
            .collect();
        if !states.is_empty() {
            parts.push(states.join(", "));
        }
        if self.older_template > 0 {
            parts.push(format!(
                "{} driver pod(s) on an older template, restarted in place in turn (no drain): {}",
                self.older_template,
                self.older_template_nodes.join(", ")
            ));
        }
        if self.skipped > 0 {
            parts.push(format!(
                "{} node(s) skipped (label nvidia.com/gpu-driver-upgrade.skip=true)",
                self.skipped
            ));
        }
        if !self.failed.is_empty() {
            parts.push(format!("failed: {}", self.failed.join("; ")));
        }
        if !self.stuck.is_empty() {
            parts.push(format!("stuck: {}", self.stuck.join("; ")));
        }
        if !self.invalid.is_empty() {
            parts.push(format!(
                "not upgraded, policy cannot be followed: {}",
                self.invalid.join("; ")
            ));
        }
        let upgrading = self.by_state.iter().any(|(s, _)| *s != UpgradeState::Done);
        if let Some(started) = self.started.filter(|_| upgrading) {
            let minutes = Duration::try_from(now.duration_since(started))
                .unwrap_or_default()
                .as_secs()
                / 60;
            parts.push(format!("running for {minutes}m"));
        }
        let message = parts.join("; ");
        let active = self
            .by_state
            .iter()
            .any(|(s, _)| s.in_progress() || *s == UpgradeState::Required);
        let desired = if self.count(UpgradeState::Failed) > 0 {
            Desired::not_ok(DRIVER_UPGRADE, "UpgradeFailed", message)
        } else if !self.invalid.is_empty() {
            Desired::not_ok(DRIVER_UPGRADE, "InvalidUpgradePolicy", message)
        } else if active && self.count(UpgradeState::Required) > self.skipped
            || self.by_state.iter().any(|(s, _)| s.in_progress())
        {
            Desired::not_ok(DRIVER_UPGRADE, "UpgradeInProgress", message)
        } else if self.skipped > 0 {
            Desired::ok(DRIVER_UPGRADE, "NodesSkipped", message)
        } else {
            Desired::ok(DRIVER_UPGRADE, "UpgradeDone", message)
        };
        desired.with_progress(self.current, self.total)
    }
}

/// Why the state machine moves no node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Off {
    /// `driver.upgradePolicy.autoUpgrade` is off (NVIDIA's default when absent).
    AutoUpgrade,
    /// `driver.enabled` is false: the operator runs no driver pod.
    DriverDisabled,
    /// `sandboxWorkloads.enabled`: the driver is not upgraded by this state machine there.
    Sandbox,
    /// No driver DaemonSet exists (yet).
    NoDaemonSet,
}

/// The condition while the state machine moves no node, for reason `why`. With the driver off
/// there is no "current driver": the message counts nothing, so it holds still while the driver
/// pods go away.
pub fn disabled(current: usize, total: usize, why: Off) -> Desired {
    let (reason, because) = match why {
        Off::DriverDisabled => {
            return Desired::ok(
                DRIVER_UPGRADE,
                "DriverDisabled",
                "driver.enabled is false: the operator runs no driver, so there is none to upgrade"
                    .to_owned(),
            );
        }
        Off::AutoUpgrade => (
            "AutoUpgradeDisabled",
            "driver.upgradePolicy.autoUpgrade is off, so a node gets a new driver only when its \
             driver pod is deleted",
        ),
        Off::Sandbox => (
            "SandboxWorkloads",
            "sandboxWorkloads.enabled is true: driver upgrades are not automated in sandbox mode",
        ),
        Off::NoDaemonSet => (
            "NoDriverDaemonSet",
            "no driver DaemonSet exists yet, so there is nothing to upgrade to",
        ),
    };
    Desired::ok(
        DRIVER_UPGRADE,
        reason,
        format!("{current}/{total} GPU nodes on the current driver; {because}"),
    )
    .with_progress(current, total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{facts::PodFacts, plan::Wait};

    fn node(name: &str, state: UpgradeState, in_sync: bool) -> NodeFacts {
        NodeFacts {
            name: name.into(),
            state: Some(state),
            since: Some(Timestamp::from_second(1_700_000_000).unwrap()),
            driver: Some(PodFacts {
                name: "d".into(),
                uid: "u".into(),
                created: Timestamp::UNIX_EPOCH,
                ready: true,
                terminating: false,
                in_sync,
                older_template: false,
            }),
            ..NodeFacts::default()
        }
    }

    fn waiting(reason: &str, stuck: bool) -> Step {
        Step {
            wait: Some(Wait {
                reason: reason.into(),
                recheck: None,
                stuck,
            }),
            ..Step::default()
        }
    }

    #[test]
    fn driver_pods_on_an_older_template_are_counted_and_named() {
        let mut older = node("b", UpgradeState::Required, true);
        if let Some(d) = older.driver.as_mut() {
            d.older_template = true;
        }
        let nodes = [node("a", UpgradeState::Done, true), older];
        let summary = Summary::of(&nodes, &[Step::default(), Step::default()], 1);
        assert_eq!((summary.current, summary.older_template), (2, 1));
        assert_eq!(summary.gauges(true).older_template, 1);
        let message = summary.condition(Timestamp::UNIX_EPOCH).message;
        assert!(
            message.contains(
                "1 driver pod(s) on an older template, restarted in place in turn (no drain): b"
            ),
            "{message}"
        );
    }

    #[test]
    fn the_message_counts_states_and_names_stuck_and_failed_nodes() {
        let mut failed = node("c", UpgradeState::Failed, true);
        failed.failure = Some("validator pod v not Ready after 600s".into());
        let nodes = [
            node("a", UpgradeState::Done, true),
            node("b", UpgradeState::PodDeletionRequired, false),
            failed,
            node("d", UpgradeState::Required, false),
        ];
        let steps = [
            Step::default(),
            waiting("evicting 1 GPU pod(s) for 40s: ml/infer", true),
            waiting("upgrade failed: x", true),
            waiting(
                "waiting for a slot (maxParallelUpgrades, maxUnavailable)",
                false,
            ),
        ];
        let summary = Summary::of(&nodes, &steps, 0);
        let now = Timestamp::from_second(1_700_000_000 + 330).unwrap();
        let c = summary.condition(now);
        assert!(!c.status);
        assert_eq!(c.reason, "UpgradeFailed");
        assert_eq!(
            c.message,
            "2/4 GPU nodes on the current driver; upgrade-required 1, pod-deletion-required 1, \
             upgrade-failed 1; failed: c (validator pod v not Ready after 600s); stuck: b \
             (evicting 1 GPU pod(s) for 40s: ml/infer); running for 5m"
        );
        let g = summary.gauges(true);
        assert_eq!((g.in_progress, g.done, g.failed, g.pending), (1, 1, 1, 1));
    }

    #[test]
    fn all_done_is_true_and_skipped_nodes_are_said() {
        let nodes = [
            node("a", UpgradeState::Done, true),
            node("b", UpgradeState::Required, false),
        ];
        let mut skipped = nodes[1].clone();
        skipped.skip = true;
        let done = Summary::of(&nodes[..1], &[Step::default()], 1).condition(Timestamp::UNIX_EPOCH);
        assert!(done.status);
        assert_eq!(done.reason, "UpgradeDone");
        assert_eq!(done.message, "1/1 GPU nodes on the current driver");
        let nodes = [nodes[0].clone(), skipped];
        let c = Summary::of(&nodes, &[Step::default(), waiting("skipped", false)], 1)
            .condition(Timestamp::UNIX_EPOCH);
        assert!(c.status);
        assert_eq!(c.reason, "NodesSkipped");
        assert!(c.message.contains("1 node(s) skipped"), "{}", c.message);
    }

    #[test]
    fn a_policy_that_moves_no_node_says_why() {
        for (why, reason, says) in [
            (
                Off::AutoUpgrade,
                "AutoUpgradeDisabled",
                "autoUpgrade is off",
            ),
            (
                Off::DriverDisabled,
                "DriverDisabled",
                "driver.enabled is false",
            ),
            (Off::Sandbox, "SandboxWorkloads", "sandboxWorkloads.enabled"),
            (Off::NoDaemonSet, "NoDriverDaemonSet", "no driver DaemonSet"),
        ] {
            let c = disabled(2, 6, why);
            assert!(c.status);
            assert_eq!(c.reason, reason);
            assert!(c.message.contains(says), "{}", c.message);
            // With the driver off there is no current driver to count.
            assert_eq!(
                c.message
                    .starts_with("2/6 GPU nodes on the current driver; "),
                why != Off::DriverDisabled,
                "{}",
                c.message
            );
        }
    }
}
