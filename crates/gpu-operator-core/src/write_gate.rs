//! Which ClusterPolicy status changes are worth a request now. A user reads the state, each
//! condition's status and reason, and the counts in its message; while pods roll out the counts
//! and the nodes named in the messages change many times a second, which written as they come
//! would be hundreds of status patches per rollout. So a change is written at once when what it
//! says moves: the status, the reason, the generation acknowledged, or a count crossing a step
//! (see [`step`]); any other change of the message (a count within its step, another problem
//! node) waits until it has held still for [`QUIET`], and is folded into the next write if one
//! comes first. Nothing here delays a condition becoming `True`: that is a status change.

use std::{
    collections::HashMap,
    sync::{Mutex, PoisonError},
    time::{Duration, Instant},
};

/// How long a change that moves no step must hold still before it is written: long enough that
/// a rollout's stream of count changes is folded into its steps, short enough that a settled
/// message is written within seconds.
pub const QUIET: Duration = Duration::from_secs(3);

/// The progress step of `ready` out of `desired`: 0 below half, 1 from half, 2 when all are
/// ready. Three steps keep a rollout's writes per condition constant whatever the fleet size.
pub fn step(ready: usize, desired: usize) -> u8 {
    match ready.saturating_mul(2).checked_div(desired) {
        _ if ready >= desired => 2,
        Some(0) | None => 0,
        Some(_) => 1,
    }
}

/// What to do with a change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Send it now.
    Write,
    /// Look again after this long (the change has not held still for [`QUIET`] yet).
    Wait(Duration),
}

/// The memory behind the decisions, per ClusterPolicy condition: the step last written by this
/// process and the pending change with the time it was first seen.
#[derive(Debug, Default)]
pub struct WriteGate(Mutex<HashMap<String, Entry>>);

#[derive(Debug, Default)]
struct Entry {
    /// The step of the last write, once this process wrote the condition.
    written: Written,
    pending: Option<(String, Instant)>,
}

/// What this process last wrote of a condition's progress.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Written {
    /// Nothing yet (the live condition's step is unknown, say after a restart).
    #[default]
    Unknown,
    /// A write at this step (`None`: the condition has no counts).
    At(Option<u8>),
}

impl WriteGate {
    /// Whether the change of condition `key` (a ClusterPolicy's uid and the condition type) to a
    /// message `detail` at progress `step` is written at `now`. `moved` says that its status,
    /// reason or acknowledged generation differ from the live ones.
    pub fn decide(
        &self,
        key: &str,
        moved: bool,
        step: Option<u8>,
        detail: &str,
        now: Instant,
    ) -> Decision {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = map.entry(key.to_owned()).or_default();
        // Not written by this process yet (say, after a restart): the live step is unknown.
        if moved || entry.written != Written::At(step) {
            return Decision::Write;
        }
        match &entry.pending {
            Some((pending, since)) if pending == detail => {
                let still = now.saturating_duration_since(*since);
                if still >= QUIET {
                    Decision::Write
                } else {
                    Decision::Wait(QUIET.saturating_sub(still))
                }
            }
            _ => {
                entry.pending = Some((detail.to_owned(), now));
                Decision::Wait(QUIET)
            }
        }
    }

    /// Records that condition `key` was written (or found current) at progress `step`.
    pub fn written(&self, key: &str, step: Option<u8>) {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = map.entry(key.to_owned()).or_default();
        entry.written = Written::At(step);
        entry.pending = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_below_half_from_half_and_all() {
        // (ready, desired, step), by hand.
        for (ready, desired, want) in [
            (0, 857, 0),
            (428, 857, 0),
            (429, 857, 1),
            (856, 857, 1),
            (857, 857, 2),
            (0, 0, 2),
            (3, 2, 2),
        ] {
            assert_eq!(step(ready, desired), want, "{ready}/{desired}");
        }
    }

    #[test]
    fn moves_and_steps_are_written_at_once_the_rest_once_it_held_still() {
        let gate = WriteGate::default();
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        assert_eq!(
            gate.decide("p/X", false, Some(0), "0/9", t0),
            Decision::Write,
            "a condition this process never wrote"
        );
        gate.written("p/X", Some(0));
        assert_eq!(
            gate.decide("p/X", false, Some(0), "1/9", at(1)),
            Decision::Wait(Duration::from_secs(3))
        );
        assert_eq!(
            gate.decide("p/X", false, Some(0), "2/9", at(2)),
            Decision::Wait(Duration::from_secs(3)),
            "another change starts the quiet time again"
        );
        assert_eq!(
            gate.decide("p/X", false, Some(0), "2/9", at(3)),
            Decision::Wait(Duration::from_secs(2)),
            "the 3 s quiet time less the 1 s it held still"
        );
        assert_eq!(
            gate.decide("p/X", false, Some(0), "2/9", at(5)),
            Decision::Write,
            "held still for the quiet time"
        );
        gate.written("p/X", Some(0));
        assert_eq!(
            gate.decide("p/X", false, Some(1), "5/9", at(6)),
            Decision::Write,
            "a step"
        );
        gate.written("p/X", Some(1));
        assert_eq!(
            gate.decide("p/X", true, Some(1), "6/9", at(7)),
            Decision::Write,
            "a status or reason change"
        );
        assert_eq!(
            gate.decide("q/X", false, None, "x", at(7)),
            Decision::Write,
            "conditions are told apart by key"
        );
    }
}
