//! Which ClusterPolicy status changes are worth a request now. A user reads the state, each
//! condition's status and reason, and the counts in its message; while pods roll out the counts
//! and the nodes named in the messages change many times a second, which written as they come
//! would be hundreds of status patches per rollout. So a change is written only when what it
//! says moves: the status, the reason, the generation acknowledged, or a count crossing a step
//! (see [`step`]). Such moves come in bursts (a DaemonSet created, then its first status; a spec
//! change acknowledged, then its rollout starting), so a move waits [`BURST`] for the rest of its
//! burst and is written once, with the latest content. Any other change of the message (a count
//! within its step, another problem node) waits until it has held still for [`QUIET`], and is
//! folded into the next write if one comes first. Nothing here delays a condition becoming
//! `True` (or the first write of a condition by this process): those are written at once.

use std::{
    collections::HashMap,
    sync::{Mutex, PoisonError},
    time::{Duration, Instant},
};

/// How long a change that moves no step must hold still before it is written: long enough that
/// a rollout's stream of count changes (kwok or a slow registry pause it for seconds) is folded
/// into its steps, short enough that a stuck rollout's nodes are named soon.
pub const QUIET: Duration = Duration::from_secs(30);

/// How long a move waits for the rest of its burst: longer than a reconcile's round trip, short
/// enough that a user watching sees it at once.
pub const BURST: Duration = Duration::from_secs(1);

/// What a change moves of what a user reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Move {
    /// It becomes `True` (or, for the overall status, `ready`, or it has no status yet): written
    /// at once.
    Ready,
    /// Another move: the status (to `False`), the reason or the acknowledged generation.
    Other,
    /// Only the message (a step crossing is found by the gate).
    None,
}

/// The progress step of `ready` out of `desired`: 0 below half, 1 from half, 2 when all are
/// ready. Three steps keep a rollout's writes per condition constant whatever the fleet size.
/// Nothing desired yet (a DaemonSet the controller has not counted yet) is no progress: a
/// rollout's first count must not read as finished and then fall back.
pub fn step(ready: usize, desired: usize) -> u8 {
    match ready.saturating_mul(2).checked_div(desired) {
        None => 0,
        _ if ready >= desired => 2,
        Some(0) => 0,
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
    /// A message change waiting to hold still, and since when it has.
    pending: Option<(String, Instant)>,
    /// When the burst of a waiting move began.
    burst: Option<Instant>,
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
    /// message `detail` at progress `step` is written at `now`; `moved` says what it moves of
    /// the live condition (its status, reason or acknowledged generation).
    pub fn decide(
        &self,
        key: &str,
        moved: Move,
        step: Option<u8>,
        detail: &str,
        now: Instant,
    ) -> Decision {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = map.entry(key.to_owned()).or_default();
        if moved == Move::Ready {
            return Decision::Write;
        }
        // Not written by this process yet (say, after a restart): the live step is unknown, so
        // the change is written as a move.
        if moved == Move::Other || entry.written != Written::At(step) {
            let since = *entry.burst.get_or_insert(now);
            let waited = now.saturating_duration_since(since);
            return if waited >= BURST {
                Decision::Write
            } else {
                Decision::Wait(BURST.saturating_sub(waited))
            };
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
        entry.burst = None;
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
            (0, 0, 0),
            (3, 2, 2),
        ] {
            assert_eq!(step(ready, desired), want, "{ready}/{desired}");
        }
    }

    #[test]
    fn becoming_ready_is_written_at_once_moves_after_their_burst_the_rest_once_it_held_still() {
        let gate = WriteGate::default();
        let t0 = Instant::now();
        let ms = |ms: u64| t0 + Duration::from_millis(ms);
        assert_eq!(
            gate.decide("p/X", Move::None, Some(0), "0/9", t0),
            Decision::Wait(Duration::from_secs(1)),
            "a condition this process never wrote: written as a move"
        );
        assert_eq!(
            gate.decide("p/X", Move::Other, Some(0), "0/9 NotReady", ms(1000)),
            Decision::Write,
            "its burst is over"
        );
        gate.written("p/X", Some(0));
        assert_eq!(
            gate.decide("p/X", Move::None, Some(0), "1/9", ms(1000)),
            Decision::Wait(Duration::from_secs(30))
        );
        assert_eq!(
            gate.decide("p/X", Move::None, Some(0), "2/9", ms(2000)),
            Decision::Wait(Duration::from_secs(30)),
            "another change starts the quiet time again"
        );
        assert_eq!(
            gate.decide("p/X", Move::None, Some(0), "2/9", ms(5000)),
            Decision::Wait(Duration::from_secs(27)),
            "the 30 s quiet time less the 3 s it held still"
        );
        assert_eq!(
            gate.decide("p/X", Move::None, Some(0), "2/9", ms(31_999)),
            Decision::Wait(Duration::from_millis(1)),
            "not quite"
        );
        assert_eq!(
            gate.decide("p/X", Move::None, Some(0), "2/9", ms(32_000)),
            Decision::Write,
            "held still for the quiet time"
        );
        gate.written("p/X", Some(0));
        // A step crossing and a reason change in one burst: one write, a second after the first.
        assert_eq!(
            gate.decide("p/X", Move::None, Some(1), "5/9", ms(33_000)),
            Decision::Wait(Duration::from_secs(1)),
            "a step waits for the rest of its burst"
        );
        assert_eq!(
            gate.decide("p/X", Move::Other, Some(1), "6/9 RollingOut", ms(33_400)),
            Decision::Wait(Duration::from_millis(600)),
            "a reason change in the same burst keeps the burst's start"
        );
        assert_eq!(
            gate.decide("p/X", Move::Other, Some(1), "6/9 RollingOut", ms(34_000)),
            Decision::Write
        );
        gate.written("p/X", Some(1));
        assert_eq!(
            gate.decide("p/X", Move::Other, Some(1), "7/9", ms(34_100)),
            Decision::Wait(Duration::from_secs(1)),
            "a write ends the burst: the next move starts its own"
        );
        assert_eq!(
            gate.decide("p/X", Move::Ready, Some(2), "9/9", ms(34_200)),
            Decision::Write,
            "becoming ready is never held back, not even inside a burst"
        );
        assert_eq!(
            gate.decide("q/X", Move::None, Some(1), "7/9", ms(34_200)),
            Decision::Wait(Duration::from_secs(1)),
            "conditions are told apart by key: q/X was never written"
        );
    }
}
