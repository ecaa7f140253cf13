//! The MIG watchdog (NVIDIA/gpu-operator#2833): a node whose MIG reconfiguration failed
//! (`nvidia.com/mig.config.state=failed`) or has been `pending` or `rebooting` for longer than
//! `migManager.watchdog.timeoutSeconds` offers no GPUs, since NVIDIA's MIG manager paused its GPU
//! operands, and nothing else notices.
//!
//! - Stuck: the node gets the label [`labels::MIG_STUCK`] (value: the state it is stuck in), which
//!   the MIG manager operand reads from the node cache to name it in `MIGManagerReady` (as it
//!   names failed nodes) and to count it in `gpu_operator_mig_config_stuck_nodes`; a Warning Event
//!   `MIGConfigStuck` on the Node says it once. The label goes when the state moves on.
//! - Recovery (`migManager.watchdog.recovery`), for a failed or stuck node, once per layout until
//!   the node reaches `success` or asks for another layout:
//!   - `retry` (default): the node's MIG manager pod is deleted, so its DaemonSet starts a new one
//!     that applies the layout again — what a person would do first — but only while no pod on the
//!     node uses its GPUs (a pod requesting an `nvidia.com/` resource): reconfiguring MIG under a
//!     running workload is never the watchdog's decision. A held retry is a Warning Event
//!     `MIGRetryHeld` naming the pods; a retry is a Normal Event `MIGConfigRetried`.
//!   - `restoreClients`: the deploy labels the MIG manager left `paused-for-mig-change` are set
//!     back to `true`, so the node offers its GPUs as they are now.
//!   - `report`: nothing more.
//!
//! When a node entered its state is this process's memory (the MIG manager writes no time): after
//! an operator restart or a change of leader a node is timed from when the new leader first saw
//! it, so a timeout may come later than set, never earlier.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Mutex, PoisonError},
    time::{Duration, Instant},
};

use gpu_operator_api::{
    ClusterPolicySpec,
    labels::{self, PAUSED_FOR_MIG_CHANGE},
    spec::{MigRecovery, MigWatchdogSpec},
};

use crate::{mig_layout::HELD_OPERANDS, workload::deploy_label};

/// The MIG manager's states the watchdog times.
const IN_PROGRESS: [&str; 2] = ["pending", "rebooting"];
/// The MIG manager's state of a layout it could not apply.
const FAILED: &str = "failed";

/// A node in trouble: its reconfiguration failed or is stuck.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trouble {
    /// The layout the node asks for (`nvidia.com/mig.config`; empty when unset).
    pub layout: String,
    /// `failed`, or the state it is stuck in.
    pub state: String,
    /// How long it has been in that state, as this process saw it.
    pub for_: Duration,
    /// The first reconcile that finds this trouble (worth an Event).
    pub new: bool,
    /// Recovery is due: the first trouble of this layout since the node last succeeded.
    pub recover: bool,
}

impl Trouble {
    /// Stuck (rather than failed).
    pub fn stuck(&self) -> bool {
        self.state != FAILED
    }
}

/// What one look at a node found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Finding {
    /// The node is in trouble.
    pub trouble: Option<Trouble>,
    /// Look again after this long (a node in progress, before its timeout).
    pub recheck_in: Option<Duration>,
}

/// Where a node's reconfiguration stands, as this process has seen it.
#[derive(Clone, Debug)]
struct Seen {
    layout: String,
    state: String,
    since: Instant,
    said: bool,
}

/// The watchdog's memory: nodes not at `success`, and the layouts already recovered per node.
#[derive(Debug, Default)]
pub struct MigWatch {
    seen: Mutex<HashMap<String, Seen>>,
    recovered: Mutex<HashMap<String, String>>,
}

impl MigWatch {
    /// Looks at `node` with `node_labels` at `now`, under `policy`'s timeout.
    pub fn observe(
        &self,
        node: &str,
        node_labels: &BTreeMap<String, String>,
        policy: &ClusterPolicySpec,
        now: Instant,
    ) -> Finding {
        let layout = node_labels
            .get(labels::MIG_CONFIG)
            .cloned()
            .unwrap_or_default();
        let state = node_labels
            .get(labels::MIG_CONFIG_STATE)
            .map(String::as_str)
            .unwrap_or_default();
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        let mut recovered = self
            .recovered
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if recovered.get(node).is_some_and(|l| *l != layout) {
            recovered.remove(node);
        }
        if state != FAILED && !IN_PROGRESS.contains(&state) {
            seen.remove(node);
            if state == crate::mig_layout::SUCCESS || state.is_empty() {
                recovered.remove(node);
            }
            return Finding::default();
        }
        let entry = seen
            .entry(node.to_owned())
            .and_modify(|s| {
                if s.layout != layout || s.state != state {
                    *s = Seen {
                        layout: layout.clone(),
                        state: state.to_owned(),
                        since: now,
                        said: false,
                    };
                }
            })
            .or_insert_with(|| Seen {
                layout: layout.clone(),
                state: state.to_owned(),
                since: now,
                said: false,
            });
        let for_ = now.saturating_duration_since(entry.since);
        let timeout = MigWatchdogSpec::timeout(watchdog(policy));
        if state != FAILED && for_ < timeout {
            return Finding {
                trouble: None,
                recheck_in: Some(timeout.saturating_sub(for_)),
            };
        }
        let new = !entry.said;
        entry.said = true;
        let recover = !recovered.contains_key(node);
        if recover {
            recovered.insert(node.to_owned(), layout.clone());
        }
        Finding {
            trouble: Some(Trouble {
                layout,
                state: state.to_owned(),
                for_,
                new,
                recover,
            }),
            recheck_in: None,
        }
    }
}

fn watchdog(policy: &ClusterPolicySpec) -> Option<&MigWatchdogSpec> {
    policy.mig_manager.as_ref()?.watchdog.as_ref()
}

/// The recovery `policy` asks for.
pub fn recovery(policy: &ClusterPolicySpec) -> MigRecovery {
    MigWatchdogSpec::recovery(watchdog(policy))
}

/// The label changes the finding asks for on a node with `node_labels`: the stuck mark set or
/// removed, and with `restoreClients` the paused deploy labels set back to `true`.
pub fn label_changes(
    node_labels: &BTreeMap<String, String>,
    finding: &Finding,
    policy: &ClusterPolicySpec,
) -> BTreeMap<String, Option<String>> {
    let mut changes = BTreeMap::new();
    let stuck = finding
        .trouble
        .as_ref()
        .filter(|t| t.stuck())
        .map(|t| t.state.clone());
    if node_labels.get(labels::MIG_STUCK) != stuck.as_ref() {
        changes.insert(labels::MIG_STUCK.to_owned(), stuck);
    }
    if finding.trouble.is_some() && recovery(policy) == MigRecovery::RestoreClients {
        for key in HELD_OPERANDS.iter().map(|o| deploy_label(o)) {
            if node_labels.get(&key).map(String::as_str) == Some(PAUSED_FOR_MIG_CHANGE) {
                changes.insert(key, Some("true".to_owned()));
            }
        }
    }
    changes
}

/// One line about `trouble` on `node`, for Events and the log.
pub fn describe(node: &str, trouble: &Trouble) -> String {
    let layout = if trouble.layout.is_empty() {
        "(none)"
    } else {
        &trouble.layout
    };
    if trouble.stuck() {
        format!(
            "node {node} has been {state} for {secs} s applying MIG layout {layout} ({key}={state}), \
             past migManager.watchdog.timeoutSeconds; its GPU operands stay paused-for-mig-change \
             and it offers no GPUs",
            state = trouble.state,
            secs = trouble.for_.as_secs(),
            key = labels::MIG_CONFIG_STATE,
        )
    } else {
        format!(
            "node {node} failed to apply MIG layout {layout} ({key}=failed)",
            key = labels::MIG_CONFIG_STATE,
        )
    }
}

#[cfg(test)]
mod tests;
