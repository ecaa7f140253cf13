//! The work of each upgrade state, as pure functions that fill in a node's [`Step`]: when it
//! moves on, what it evicts or deletes first, why it waits, and when it fails.

use std::time::Duration;

use gpu_operator_api::labels;
use k8s_openapi::jiff::Timestamp;

use crate::{
    facts::{NodeFacts, Workload},
    gpu_clients,
    plan::{NodeEvent, POLL, StateLabel, Step, Wait},
    policy::{Policy, RESTART_TIMEOUT, Removal, VALIDATION_TIMEOUT},
    state::{FAILURE_REASON, RESTART_POD, STATE_SINCE, UPGRADE_REQUESTED, UpgradeState},
};

/// The node's driver pod runs something else than asked for, or a user asked for an upgrade.
pub(crate) fn needs_upgrade(node: &NodeFacts) -> bool {
    node.requested
        || node
            .driver
            .as_ref()
            .is_some_and(|d| !d.in_sync && !d.terminating)
}

/// The node's driver pod runs the driver asked for, from an older template of ours: only what
/// leaves the loaded driver alone changed (see `PodFacts::older_template`). It is restarted in
/// place — no cordon, no eviction, no drain — as NVIDIA v26.7 restarts a pod whose
/// `DRIVER_CONFIG_DIGEST` is unchanged: the new pod finds the same driver loaded with the same
/// configuration and keeps it.
pub(crate) fn needs_refresh(node: &NodeFacts) -> bool {
    !needs_upgrade(node)
        && node
            .driver
            .as_ref()
            .is_some_and(|d| d.in_sync && d.older_template && !d.terminating)
}

/// The node's driver pod is to be restarted: a full upgrade or a restart in place.
pub(crate) fn needs_restart(node: &NodeFacts) -> bool {
    needs_upgrade(node) || needs_refresh(node)
}

pub(crate) fn required(node: &NodeFacts, admitted: bool, step: &mut Step, now: Timestamp) {
    let refresh = needs_refresh(node);
    if !needs_restart(node) && node.driver.as_ref().is_some_and(|d| !d.terminating) {
        move_to(step, UpgradeState::Done, now);
    } else if admitted {
        if refresh {
            move_to_restart(node, step, now);
        } else {
            move_to(step, UpgradeState::CordonRequired, now);
        }
        step.patch.annotations.insert(UPGRADE_REQUESTED, None);
        // Cordoned now and not by a failed upgrade of ours: the user's cordon, kept afterwards.
        if node.unschedulable && node.failure.is_none() {
            step.patch.annotations.insert(
                labels::DRIVER_UPGRADE_INITIAL_UNSCHEDULABLE,
                Some("true".to_owned()),
            );
        }
        step.event = Some(if refresh {
            NodeEvent {
                warning: false,
                reason: "DriverRestartInPlace",
                note: format!(
                    "driver pod of node {} restarted in place: its template changed, the driver it installs did not (no cordon, no eviction)",
                    node.name
                ),
            }
        } else {
            started(node, "")
        });
    } else {
        step.wait = Some(Wait {
            reason: "waiting for a slot (maxParallelUpgrades, maxUnavailable)".to_owned(),
            recheck: None,
            stuck: false,
        });
    }
}

pub(crate) fn started(node: &NodeFacts, what: &str) -> NodeEvent {
    NodeEvent {
        warning: false,
        reason: "DriverUpgradeStarted",
        note: format!(
            "driver upgrade of node {} started{what}: cordon, evict GPU pods, restart the driver pod, validate",
            node.name
        ),
    }
}

pub(crate) fn wait_for_jobs(
    policy: &Policy,
    workloads: &[Workload],
    elapsed: Duration,
    step: &mut Step,
    now: Timestamp,
) {
    let Some(selector) = &policy.wait_selector else {
        return move_to(step, UpgradeState::PodDeletionRequired, now);
    };
    let running: Vec<String> = workloads
        .iter()
        .filter(|w| !w.finished && selector.matches(&w.labels))
        .map(Workload::key)
        .collect();
    // NVIDIA's meaning of waitForCompletion.timeoutSeconds: stop waiting and go on (the jobs are
    // then evicted with the other GPU pods).
    if running.is_empty() || policy.wait_timeout.is_some_and(|t| elapsed >= t) {
        return move_to(step, UpgradeState::PodDeletionRequired, now);
    }
    step.wait = Some(Wait {
        reason: format!(
            "waiting for {} job pod(s) to complete (waitForCompletion.podSelector): {} running for {}",
            running.len(),
            running.join(", "),
            waited(elapsed)
        ),
        recheck: Some(POLL),
        stuck: true,
    });
}

/// Evicts `pods` by `removal`'s rules, then moves to `next`; fails on a pod the rules forbid to
/// evict, or on the timeout.
#[allow(clippy::too_many_arguments, reason = "one call site per removal state")]
pub(crate) fn remove(
    node: &NodeFacts,
    pods: &[&Workload],
    removal: &Removal,
    section: &str,
    what: &str,
    next: UpgradeState,
    elapsed: Duration,
    step: &mut Step,
    now: Timestamp,
) {
    if pods.is_empty() {
        if next == UpgradeState::PodRestartRequired {
            move_to_restart(node, step, now);
        } else {
            move_to(step, next, now);
        }
        return;
    }
    let field = if section == "gpuPodDeletion" {
        "driver.upgradePolicy.gpuPodDeletion"
    } else {
        "driver.upgradePolicy.drain"
    };
    for pod in pods {
        let refused = if !pod.controlled && !removal.force {
            Some(format!(
                "{what} {} has no controller, so it would not come back after eviction: set {field}.force=true to evict it anyway, or delete it yourself",
                pod.key()
            ))
        } else if pod.empty_dir && !removal.delete_empty_dir {
            Some(format!(
                "{what} {} uses an emptyDir volume whose data eviction loses: set {field}.deleteEmptyDir=true to evict it anyway, or delete it yourself",
                pod.key()
            ))
        } else {
            None
        };
        if let Some(reason) = refused {
            return fail(node, step, &reason, now);
        }
    }
    let names: Vec<String> = pods.iter().map(|p| p.key()).collect();
    if let Some(timeout) = removal.timeout
        && elapsed >= timeout
    {
        let reason = format!(
            "{} {what}(s) still on the node after {}s ({field}.timeoutSeconds): {}",
            names.len(),
            timeout.as_secs(),
            names.join(", ")
        );
        return fail(node, step, &reason, now);
    }
    step.evict = pods
        .iter()
        .filter(|p| !p.terminating)
        .map(|p| (p.namespace.clone(), p.name.clone()))
        .collect();
    step.wait = Some(Wait {
        reason: format!(
            "evicting {} {what}(s) for {}: {}",
            names.len(),
            waited(elapsed),
            names.join(", ")
        ),
        recheck: Some(POLL),
        stuck: elapsed >= POLL * 2,
    });
}

/// Enters `pod-restart-required`, recording which driver pod is the one to restart.
pub(crate) fn move_to_restart(node: &NodeFacts, step: &mut Step, now: Timestamp) {
    move_to(step, UpgradeState::PodRestartRequired, now);
    let uid = node
        .driver
        .as_ref()
        .filter(|d| !d.terminating)
        .map(|d| d.uid.clone());
    step.patch.annotations.insert(RESTART_POD, uid);
}

pub(crate) fn restart(node: &NodeFacts, elapsed: Duration, step: &mut Step, now: Timestamp) {
    let live = node.driver.as_ref().filter(|d| !d.terminating);
    match live {
        Some(pod) if node.restart_pod.as_deref() == Some(pod.uid.as_str()) || !pod.in_sync => {
            step.delete.push((pod.name.clone(), pod.uid.clone()));
            step.wait = Some(Wait {
                reason: format!("restarting driver pod {}", pod.name),
                recheck: None,
                stuck: false,
            });
        }
        Some(pod) if pod.ready => move_to(step, UpgradeState::ValidationRequired, now),
        _ if elapsed >= RESTART_TIMEOUT => {
            let reason = match live {
                Some(pod) => format!(
                    "driver pod {} not Ready after {}s",
                    pod.name,
                    elapsed.as_secs()
                ),
                None => format!("no new driver pod on the node after {}s", elapsed.as_secs()),
            };
            fail(node, step, &reason, now);
        }
        _ => {
            let reason = live.map_or_else(
                || "waiting for the driver DaemonSet to create the new driver pod".to_owned(),
                |pod| {
                    format!(
                        "waiting for driver pod {} to be Ready ({})",
                        pod.name,
                        waited(elapsed)
                    )
                },
            );
            step.wait = Some(Wait {
                reason,
                recheck: Some(RESTART_TIMEOUT.saturating_sub(elapsed)),
                stuck: elapsed >= Duration::from_secs(300),
            });
        }
    }
}

pub(crate) fn validate(node: &NodeFacts, elapsed: Duration, step: &mut Step, now: Timestamp) {
    let driver_started = node.driver.as_ref().map(|d| d.created);
    let validator = node.validator.as_ref().filter(|v| !v.terminating);
    match validator {
        // A validator that ran before the new driver validated the old one: it runs again.
        Some(v) if driver_started.is_some_and(|d| v.created < d) => {
            step.delete.push((v.name.clone(), v.uid.clone()));
            step.wait = Some(Wait {
                reason: format!("restarting validator pod {} on the new driver", v.name),
                recheck: None,
                stuck: false,
            });
        }
        Some(v) if v.ready => move_to(step, UpgradeState::UncordonRequired, now),
        _ if elapsed >= VALIDATION_TIMEOUT => {
            let reason = match validator {
                Some(v) => format!(
                    "validator pod {} not Ready after {}s",
                    v.name,
                    elapsed.as_secs()
                ),
                None => format!(
                    "no validator pod (app=nvidia-operator-validator) on the node after {}s",
                    elapsed.as_secs()
                ),
            };
            fail(node, step, &reason, now);
        }
        _ => {
            let reason = validator.map_or_else(
                || "waiting for the validator pod to start on the new driver".to_owned(),
                |v| {
                    format!(
                        "validator pod {} not Ready yet ({})",
                        v.name,
                        waited(elapsed)
                    )
                },
            );
            step.wait = Some(Wait {
                reason,
                recheck: Some(VALIDATION_TIMEOUT.saturating_sub(elapsed)),
                stuck: elapsed >= Duration::from_secs(120),
            });
        }
    }
}

pub(crate) fn fail(node: &NodeFacts, step: &mut Step, reason: &str, now: Timestamp) {
    step.evict.clear();
    step.delete.clear();
    move_to(step, UpgradeState::Failed, now);
    gpu_clients::resume(node, &mut step.patch);
    step.patch
        .annotations
        .insert(FAILURE_REASON, Some(reason.to_owned()));
    step.event = Some(NodeEvent {
        warning: true,
        reason: "DriverUpgradeFailed",
        note: format!(
            "driver upgrade of node {} failed: {reason}; it stays cordoned until annotated {UPGRADE_REQUESTED}=true (retry)",
            node.name
        ),
    });
    step.wait = Some(Wait {
        reason: format!("upgrade failed: {reason}"),
        recheck: None,
        stuck: true,
    });
}

pub(crate) fn move_to(step: &mut Step, state: UpgradeState, now: Timestamp) {
    step.patch.state = StateLabel::Set(state);
    step.patch
        .annotations
        .insert(STATE_SINCE, Some(now.to_string()));
    step.wait = None;
}

/// Ends the upgrade: uncordons the node unless its user had cordoned it, drops our records.
pub(crate) fn uncordon(node: &NodeFacts, step: &mut Step, now: Timestamp) {
    move_to(step, UpgradeState::Done, now);
    gpu_clients::resume(node, &mut step.patch);
    if !node.initially_unschedulable && node.unschedulable {
        step.patch.unschedulable = Some(false);
    }
    for key in [
        labels::DRIVER_UPGRADE_INITIAL_UNSCHEDULABLE,
        FAILURE_REASON,
        RESTART_POD,
    ] {
        step.patch.annotations.insert(key, None);
    }
    let kept = if node.initially_unschedulable {
        " (it stays cordoned, as it was before)"
    } else {
        ""
    };
    step.event = Some(NodeEvent {
        warning: false,
        reason: "DriverUpgradeDone",
        note: format!("node {} runs the desired driver{kept}", node.name),
    });
}

/// A failed node waits for its user's request, then retries from the cordon.
pub(crate) fn failed(node: &NodeFacts, admitted: bool, step: &mut Step, now: Timestamp) {
    if admitted {
        // A retry the user asked for: the node is cordoned already (by us, or before).
        move_to(step, UpgradeState::CordonRequired, now);
        step.patch.annotations.insert(UPGRADE_REQUESTED, None);
        step.patch.annotations.insert(FAILURE_REASON, None);
        step.event = Some(started(node, " (retry)"));
    } else {
        let why = node
            .failure
            .clone()
            .unwrap_or_else(|| "no reason recorded".to_owned());
        step.wait = Some(Wait {
            reason: format!(
                "upgrade failed: {why}; annotate the node {UPGRADE_REQUESTED}=true to retry"
            ),
            recheck: None,
            stuck: true,
        });
    }
}

/// Why a node that needs an upgrade waits with the skip label.
pub(crate) fn skipped() -> Wait {
    Wait {
        reason: format!("skipped: labelled {}=true", labels::DRIVER_UPGRADE_SKIP),
        recheck: None,
        stuck: false,
    }
}

/// How long a node has waited, in whole minutes: the condition that shows it is not rewritten
/// on every pass while a node waits.
pub(crate) fn waited(elapsed: Duration) -> String {
    match elapsed.as_secs() / 60 {
        0 => "under a minute".to_owned(),
        minutes => format!("{minutes}m"),
    }
}
