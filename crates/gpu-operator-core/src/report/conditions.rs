//! Conditions as `metav1.Condition`: built from what a reconciler observed, merged with the live
//! ones so `lastTransitionTime` only moves when the status flips, and compared without the time so
//! an unchanged condition is never written again.

use k8s_openapi::{
    apimachinery::pkg::apis::meta::v1::{Condition, Time},
    jiff::Timestamp,
};

/// What a reconciler wants one condition to say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Desired {
    /// Condition type, such as `DevicePluginReady`.
    pub type_: String,
    /// `True` or `False`.
    pub status: bool,
    /// PascalCase reason.
    pub reason: String,
    /// Human-readable detail.
    pub message: String,
    /// The progress step of the counts in the message ([`crate::pipeline::write_gate::step`]), when
    /// it has counts: a change within a step is not urgent.
    pub step: Option<u8>,
}

impl Desired {
    /// A condition that is `True`.
    pub fn ok(type_: &str, reason: &str, message: impl Into<String>) -> Self {
        Self {
            type_: type_.to_owned(),
            status: true,
            reason: reason.to_owned(),
            message: message.into(),
            step: None,
        }
    }

    /// A condition that is `False`.
    pub fn not_ok(type_: &str, reason: &str, message: impl Into<String>) -> Self {
        Self {
            type_: type_.to_owned(),
            status: false,
            reason: reason.to_owned(),
            message: message.into(),
            step: None,
        }
    }

    /// This condition with counts of `ready` out of `desired` in its message.
    #[must_use]
    pub fn with_progress(mut self, ready: usize, desired: usize) -> Self {
        self.step = Some(crate::pipeline::write_gate::step(ready, desired));
        self
    }
}

/// `"True"` or `"False"`.
pub fn status_str(status: bool) -> &'static str {
    if status { "True" } else { "False" }
}

/// The condition to write for `desired`, given the live conditions: the transition time of the
/// live condition of that type is kept unless its status differs.
pub fn merge(
    live: &[Condition],
    desired: &Desired,
    generation: Option<i64>,
    now: Timestamp,
) -> Condition {
    let status = status_str(desired.status);
    let previous = live.iter().find(|c| c.type_ == desired.type_);
    let last_transition_time = match previous {
        Some(c) if c.status == status => c.last_transition_time.clone(),
        _ => Time(now),
    };
    Condition {
        type_: desired.type_.clone(),
        status: status.to_owned(),
        reason: desired.reason.clone(),
        message: desired.message.clone(),
        observed_generation: generation,
        last_transition_time,
    }
}

/// Whether the live condition of `desired`'s type has another status or reason than `desired`,
/// acknowledges another generation, or is missing: a change a user must see at once.
pub fn moved(live: &[Condition], desired: &Desired, generation: Option<i64>) -> bool {
    !live.iter().any(|c| {
        c.type_ == desired.type_
            && c.status == status_str(desired.status)
            && c.reason == desired.reason
            && c.observed_generation == generation
    })
}

/// Whether the live conditions already say what `desired` says for this generation (the time is
/// not compared).
pub fn is_current(live: &[Condition], desired: &Desired, generation: Option<i64>) -> bool {
    live.iter().any(|c| {
        c.type_ == desired.type_
            && c.status == status_str(desired.status)
            && c.reason == desired.reason
            && c.message == desired.message
            && c.observed_generation == generation
    })
}

pub use gpu_operator_api::conditions::truncate;

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).unwrap()
    }

    #[test]
    fn transition_time_moves_only_when_the_status_flips() {
        let first = merge(
            &[],
            &Desired::not_ok("X", "Pending", "0/3"),
            Some(1),
            at(100),
        );
        assert_eq!(first.last_transition_time.0, at(100));
        let same_status = merge(
            std::slice::from_ref(&first),
            &Desired::not_ok("X", "Pending", "1/3"),
            Some(1),
            at(200),
        );
        assert_eq!(same_status.last_transition_time.0, at(100));
        assert_eq!(same_status.message, "1/3");
        let flipped = merge(
            &[same_status],
            &Desired::ok("X", "Ready", "3/3"),
            Some(2),
            at(300),
        );
        assert_eq!(flipped.last_transition_time.0, at(300));
        assert_eq!(flipped.observed_generation, Some(2));
    }

    #[test]
    fn an_unchanged_condition_is_current_whatever_the_time() {
        let desired = Desired::ok("X", "Ready", "3/3");
        let live = vec![merge(&[], &desired, Some(4), at(1))];
        assert!(is_current(&live, &desired, Some(4)));
        assert!(
            !is_current(&live, &desired, Some(5)),
            "a new generation must be acknowledged"
        );
        assert!(!is_current(
            &live,
            &Desired::ok("X", "Ready", "2/3"),
            Some(4)
        ));
        assert!(!is_current(&[], &desired, Some(4)));
    }

    #[test]
    fn truncation_keeps_char_boundaries() {
        assert_eq!(truncate("abc", 10), "abc");
        assert_eq!(truncate("ééééé", 6), "é...");
    }
}
