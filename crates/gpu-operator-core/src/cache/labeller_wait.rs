//! Waiting, briefly, for the node labeller. A node whose NFD labels show an NVIDIA GPU is a GPU
//! node only once the labeller has set `nvidia.com/gpu.present=true` on it, which it does as soon
//! as a ClusterPolicy exists. A reconciler that runs in that moment (a ClusterPolicy just created
//! on a fresh fleet) would see no GPU nodes, or only some: it would write `NoGPUNodes` everywhere
//! and flip the overall status to `ready` for a second, and a driver render would pick its
//! DaemonSets' names from whichever operating systems happened to be labelled first. So while GPU
//! candidates are unlabelled, reconcilers that depend on the set of GPU nodes wait — for at most
//! [`BOUND`] from the moment the candidates were first seen, so a labeller that cannot label a
//! node (say, a webhook refusing the patch) delays nothing for longer than that.

use std::{
    sync::{Mutex, PoisonError},
    time::{Duration, Instant},
};

/// The longest a reconciler waits for the labeller, from the first sight of unlabelled
/// candidates: a labeller's pass over a thousand nodes takes seconds; anything longer is a
/// labeller that is stuck, and is reported by the conditions rather than waited for.
pub const BOUND: Duration = Duration::from_secs(5);

/// How soon a reconciler that waits looks again (the labels' watch events usually wake it
/// first).
pub const POLL: Duration = Duration::from_millis(200);

/// When unlabelled GPU candidates were first seen (shared by every reconciler of the process).
#[derive(Debug, Default)]
pub struct LabellerWait(Mutex<Option<Instant>>);

impl LabellerWait {
    /// Whether a reconciler should wait at `now`, given `unlabelled` GPU candidates in the cache.
    pub fn should_wait(&self, unlabelled: usize, now: Instant) -> bool {
        let mut since = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if unlabelled == 0 {
            *since = None;
            return false;
        }
        now.saturating_duration_since(*since.get_or_insert(now)) < BOUND
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_while_candidates_are_unlabelled_but_never_longer_than_the_bound() {
        let wait = LabellerWait::default();
        let t0 = Instant::now();
        let s = |secs: u64| t0 + Duration::from_secs(secs);
        assert!(!wait.should_wait(0, t0), "nothing to label: no wait");
        assert!(wait.should_wait(3, t0), "candidates appear");
        assert!(
            wait.should_wait(1, s(4)),
            "still within 5 s of the first sight"
        );
        assert!(
            !wait.should_wait(1, s(5)),
            "a candidate still unlabelled after 5 s: go on without it"
        );
        assert!(!wait.should_wait(1, s(60)), "and never wait for it again");
        assert!(!wait.should_wait(0, s(61)), "labelled at last");
        assert!(
            wait.should_wait(2, s(62)),
            "new candidates later: a fresh wait"
        );
    }
}
