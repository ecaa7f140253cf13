//! The Node conditions the health agent owns, and the [`Tracker`] that turns polls into them with
//! hysteresis: a fault sets its family's condition at once; a state fault clears only after
//! [`CLEAR_AFTER`] polls in a row without it; an XID stays until the node reboots (a condition
//! that turned True before the node's boot is cleared; one from this boot is carried over an
//! agent restart). Problem conditions are True while the problem is present, as
//! node-problem-detector's are; the summary `GPUHealthy` follows `Ready`.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::core::v1::NodeCondition, apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp,
};

use crate::{
    faults::{Family, Fault, GpuRef},
    reading::NodeReading,
};

pub use gpu_operator_api::conditions::node::{
    GPU_HEALTH_TYPES as TYPES, GPU_HEALTHY, GPU_LOST, GPU_MEMORY_ERROR, GPU_THROTTLED,
    GPU_XID_ERROR,
};

/// `GPUHealthy=True`.
pub const HEALTHY_REASON: &str = "GPUsHealthy";
/// `GPUHealthy=Unknown`: NVML (or the DCGM endpoint) cannot be read, so health is not known.
pub const HEALTH_UNKNOWN_REASON: &str = "HealthUnknown";

/// Clean polls in a row before a state fault's condition clears.
pub const CLEAR_AFTER: u32 = 3;
/// Longest message written into a condition.
const MAX_MESSAGE: usize = 1024;

/// A condition the agent wants on the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Desired {
    /// One of [`TYPES`].
    pub type_: &'static str,
    /// `True`, `False` or `Unknown`.
    pub status: &'static str,
    /// PascalCase reason.
    pub reason: String,
    /// Detail.
    pub message: String,
}

impl Desired {
    fn new(type_: &'static str, status: &'static str, reason: &str, message: &str) -> Self {
        let message = if message.len() > MAX_MESSAGE {
            let end = (0..=MAX_MESSAGE)
                .rev()
                .find(|i| message.is_char_boundary(*i))
                .unwrap_or(0);
            format!("{}…", &message[..end])
        } else {
            message.to_owned()
        };
        Self {
            type_,
            status,
            reason: reason.to_owned(),
            message,
        }
    }

    /// `GPUHealthy=Unknown` with reason `HealthUnknown`, naming what could not be read.
    pub fn unknown(why: &str) -> Self {
        Self::new(
            GPU_HEALTHY,
            "Unknown",
            HEALTH_UNKNOWN_REASON,
            &format!("GPU health cannot be read: {why}"),
        )
    }
}

/// A fault the tracker holds.
#[derive(Debug, Clone)]
struct Seen {
    fault: Fault,
    first: Timestamp,
    last: Timestamp,
    times: u64,
    /// Polls in a row without it (state faults).
    absent: u32,
}

/// An XID condition of this boot, written before this agent started.
#[derive(Debug, Clone)]
struct Carried {
    reason: String,
    message: String,
}

/// The faults of the node over time.
#[derive(Debug, Clone, Default)]
pub struct Tracker {
    seen: BTreeMap<(Family, &'static str, GpuRef), Seen>,
    carried_xid: Option<Carried>,
    gpus: usize,
    unreadable: Vec<String>,
}

fn time_of(condition: &NodeCondition) -> Option<Timestamp> {
    condition.last_transition_time.as_ref().map(|t| t.0)
}

impl Tracker {
    /// A tracker that resumes from the node's conditions: an XID condition that turned True
    /// after `boot` (this boot) is kept; one from before is cleared by the next write.
    pub fn resume(existing: &[NodeCondition], boot: Timestamp) -> Self {
        let carried_xid = existing
            .iter()
            .find(|c| c.type_ == GPU_XID_ERROR && c.status == "True")
            .filter(|c| time_of(c).is_some_and(|t| t >= boot))
            .map(|c| Carried {
                reason: c.reason.clone().unwrap_or_default(),
                message: c.message.clone().unwrap_or_default(),
            });
        Self {
            carried_xid,
            ..Self::default()
        }
    }

    /// Takes one poll: `state` are the state faults read now, `xids` the XID faults that arrived.
    pub fn observe(
        &mut self,
        reading: &NodeReading,
        state: Vec<Fault>,
        xids: Vec<Fault>,
        now: Timestamp,
    ) {
        self.gpus = reading.gpus.len();
        self.unreadable = unreadable(reading);
        for seen in self.seen.values_mut() {
            if !seen.fault.family.is_sticky() {
                seen.absent += 1;
            }
        }
        for fault in state.into_iter().chain(xids) {
            let sticky = fault.family.is_sticky();
            let entry = self.seen.entry(fault.key()).or_insert_with(|| Seen {
                fault: fault.clone(),
                first: now,
                last: now,
                times: 0,
                absent: 0,
            });
            entry.absent = 0;
            entry.last = now;
            if sticky {
                entry.times += 1;
            }
            entry.fault = fault;
        }
        self.seen.retain(|_, seen| seen.absent < CLEAR_AFTER);
    }

    /// The conditions the node should carry now.
    pub fn desired(&self) -> Vec<Desired> {
        let mut families = Vec::new();
        for family in Family::ALL {
            families.push(self.family_condition(family));
        }
        let unhealthy: Vec<&Desired> = Family::ALL
            .iter()
            .zip(&families)
            .filter(|(family, d)| family.makes_unhealthy() && d.status == "True")
            .map(|(_, d)| d)
            .collect();
        let mut notes = String::new();
        if !self.unreadable.is_empty() {
            notes = format!("; not readable: {}", self.unreadable.join(", "));
        }
        let summary = match unhealthy.first() {
            None => Desired::new(
                GPU_HEALTHY,
                "True",
                HEALTHY_REASON,
                &format!("{} GPUs without faults{notes}", self.gpus),
            ),
            Some(first) => {
                let message: Vec<String> = unhealthy
                    .iter()
                    .map(|d| format!("{}: {}", d.type_, d.message))
                    .collect();
                Desired::new(
                    GPU_HEALTHY,
                    "False",
                    &first.reason,
                    &format!("{}{notes}", message.join(" | ")),
                )
            }
        };
        let mut out = vec![summary];
        out.extend(families);
        out
    }

    fn family_condition(&self, family: Family) -> Desired {
        let seen: Vec<&Seen> = self
            .seen
            .values()
            .filter(|s| s.fault.family == family)
            .collect();
        let carried = self.carried_xid.as_ref().filter(|_| family == Family::Xid);
        let most_severe = seen
            .iter()
            .min_by_key(|s| crate::faults::severity_rank(s.fault.reason));
        let Some(first) = most_severe else {
            return match carried {
                Some(c) => Desired::new(family.condition_type(), "True", &c.reason, &c.message),
                None => Desired::new(
                    family.condition_type(),
                    "False",
                    family.healthy_reason(),
                    "no fault seen",
                ),
            };
        };
        let mut parts: Vec<String> = seen.iter().map(|s| describe(s)).collect();
        if let Some(c) = carried {
            parts.push(format!("earlier this boot: {}", c.message));
        }
        Desired::new(
            family.condition_type(),
            "True",
            first.fault.reason,
            &parts.join("; "),
        )
    }
}

fn seconds(t: Timestamp) -> String {
    Timestamp::from_second(t.as_second())
        .unwrap_or(t)
        .to_string()
}

fn describe(seen: &Seen) -> String {
    let f = &seen.fault;
    let when = if f.family.is_sticky() {
        format!(
            "first seen {}, last seen {}, {} time{}",
            seconds(seen.first),
            seconds(seen.last),
            seen.times,
            if seen.times == 1 { "" } else { "s" }
        )
    } else {
        format!("since {}", seconds(seen.first))
    };
    format!(
        "{}: {}, {when}; NVIDIA's recommended action: {}",
        f.gpu, f.detail, f.action
    )
}

/// The counters of a reading that could not be read for a reason other than `NotSupported`.
fn unreadable(reading: &NodeReading) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(watch) = &reading.xid_watch {
        out.push(format!("XID events ({watch})"));
    }
    for gpu in reading.gpus.iter().filter(|g| !g.lost) {
        let errors = [
            gpu.uuid.as_ref().err(),
            gpu.volatile_dbe.as_ref().err(),
            gpu.aggregate_dbe.as_ref().err(),
            gpu.retired_pages_pending.as_ref().err(),
            gpu.row_remap_pending.as_ref().err(),
            gpu.row_remap_failure.as_ref().err(),
            gpu.recovery_action.as_ref().err(),
            gpu.slowdown.as_ref().err(),
        ];
        for e in errors.into_iter().flatten().filter(|e| !e.not_supported()) {
            out.push(format!("GPU {} {e}", gpu.index));
        }
    }
    out
}

/// How long a message-only change waits after the condition's last write (status and reason
/// changes are written at once).
pub const MESSAGE_REFRESH_SECONDS: i64 = 60;

/// The conditions to write: each desired one that differs from the node's in status or reason,
/// or in message when the node's was written over [`MESSAGE_REFRESH_SECONDS`] ago.
/// `lastTransitionTime` moves only when the status flips. Empty: no request.
pub fn changed(
    existing: &[NodeCondition],
    desired: &[Desired],
    now: Timestamp,
) -> Vec<NodeCondition> {
    desired
        .iter()
        .filter_map(|d| {
            let old = existing.iter().find(|c| c.type_ == d.type_);
            if let Some(o) = old {
                let same_state = o.status == d.status && o.reason.as_deref() == Some(&d.reason);
                let same_message = o.message.as_deref() == Some(&d.message);
                let fresh = o
                    .last_heartbeat_time
                    .as_ref()
                    .is_some_and(|t| now.as_second() - t.0.as_second() < MESSAGE_REFRESH_SECONDS);
                if same_state && (same_message || fresh) {
                    return None;
                }
            }
            let now = Time(Timestamp::from_second(now.as_second()).unwrap_or(now));
            let transition = old
                .filter(|o| o.status == d.status)
                .and_then(|o| o.last_transition_time.clone())
                .unwrap_or_else(|| now.clone());
            Some(NodeCondition {
                type_: d.type_.to_owned(),
                status: d.status.to_owned(),
                reason: Some(d.reason.clone()),
                message: Some(d.message.clone()),
                last_heartbeat_time: Some(now),
                last_transition_time: Some(transition),
            })
        })
        .collect()
}

/// An Event to record about a condition's transition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    /// Warning (a fault appeared) or Normal (it cleared).
    pub warning: bool,
    /// The fault's reason, or [`RECOVERED_REASON`].
    pub reason: String,
    /// The condition's type and message.
    pub note: String,
}

/// The Event reason of a fault condition that cleared.
pub const RECOVERED_REASON: &str = "GPUFaultCleared";

/// The Events for `changed` (about to replace `existing`): a Warning for each fault condition
/// that turns True (or changes its reason while True), a Normal one for each that turns False;
/// nothing for the summary (it repeats them) or for message-only updates.
pub fn transitions(existing: &[NodeCondition], changed: &[NodeCondition]) -> Vec<Transition> {
    changed
        .iter()
        .filter(|c| c.type_ != GPU_HEALTHY)
        .filter_map(|c| {
            let old = existing.iter().find(|o| o.type_ == c.type_);
            let was_true = old.is_some_and(|o| o.status == "True");
            let message = c.message.clone().unwrap_or_default();
            match (c.status.as_str(), was_true) {
                ("True", false) => Some(true),
                ("True", true) if old.and_then(|o| o.reason.as_ref()) != c.reason.as_ref() => {
                    Some(true)
                }
                ("False", true) => Some(false),
                _ => None,
            }
            .map(|warning| Transition {
                warning,
                reason: if warning {
                    c.reason.clone().unwrap_or_default()
                } else {
                    RECOVERED_REASON.to_owned()
                },
                note: format!("{}: {message}", c.type_),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;
