//! Our own label patches that the node cache has not shown yet. Reconciling such a node from the
//! cache would start from labels older than our own write: the patch's test of the labels then
//! fails (HTTP 422) and the work is repeated. A node's entry holds a fingerprint of the labels our
//! patch left on it and is cleared when the watch delivers them: watch events arrive in order, so
//! from then on the cache is at least as new as our write. Versions in between (a status
//! heartbeat that happened before our patch but reached the cache after it) no longer count as
//! caught up, which they did when the entry held the version we patched from.

use std::{
    collections::HashMap,
    hash::{DefaultHasher, Hash as _, Hasher as _},
    sync::{Mutex, PoisonError},
    time::{Duration, Instant},
};

use gpu_operator_core::cache::node_meta::Labels;

/// Entries above which those of deleted nodes are swept.
const SWEEP_ABOVE: usize = 1024;
/// How long an entry is trusted: a relist after a watch expiry may skip the event of our write.
pub const EXPIRES_AFTER: Duration = Duration::from_secs(30);

/// A fingerprint of a node's labels.
pub fn fingerprint(labels: &Labels) -> u64 {
    let mut hasher = DefaultHasher::new();
    labels.hash(&mut hasher);
    hasher.finish()
}

/// Node name → the fingerprint of the labels our last patch left, and when it was sent.
#[derive(Debug, Default)]
pub struct OwnWrites(Mutex<HashMap<String, (u64, Instant)>>);

impl OwnWrites {
    /// Whether node `name`'s cache entry may still predate our last patch of it (its event has
    /// not been seen yet, and the patch is younger than [`EXPIRES_AFTER`] at `now`).
    pub fn awaiting(&self, name: &str, now: Instant) -> bool {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match map.get(name) {
            Some((_, at)) if now.saturating_duration_since(*at) < EXPIRES_AFTER => true,
            Some(_) => {
                map.remove(name);
                false
            }
            None => false,
        }
    }

    /// A watch event of node `name` with `labels`: if they are the ones our patch left, the cache
    /// has caught up with it.
    pub fn observe(&self, name: &str, labels: &Labels) {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if map
            .get(name)
            .is_some_and(|(written, _)| *written == fingerprint(labels))
        {
            map.remove(name);
        }
    }

    /// Records that we patched node `name`, leaving labels with fingerprint `written`, at `now`;
    /// `cached` gives the cache's labels of a node by name (none: the node is gone). Nothing is
    /// recorded when the cache shows them already (the watch event came before the response).
    pub fn record(
        &self,
        name: &str,
        written: u64,
        now: Instant,
        cached: impl Fn(&str) -> Option<u64>,
    ) {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if map.len() >= SWEEP_ABOVE {
            map.retain(|name, _| cached(name).is_some());
        }
        // The cache is written before its event is passed on, and `observe` takes the same lock:
        // an event that came first shows here, one that comes later clears the entry.
        if cached(name) == Some(written) {
            map.remove(name);
        } else {
            map.insert(name.to_owned(), (written, now));
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.lock().map(|m| m.len()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        Labels::from(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>(),
        )
    }

    #[test]
    fn a_node_waits_until_the_watch_shows_the_labels_we_wrote() {
        let writes = OwnWrites::default();
        let t0 = Instant::now();
        let before = labels(&[("a", "1")]);
        let ours = labels(&[("a", "1"), ("nvidia.com/gpu.present", "true")]);
        assert!(!writes.awaiting("n", t0));
        writes.record("n", fingerprint(&ours), t0, |_| Some(fingerprint(&before)));
        assert!(
            writes.awaiting("n", t0),
            "the cache still has the old labels"
        );
        // A heartbeat from before our patch reaches the cache after it: a new version, old labels.
        writes.observe("n", &before);
        assert!(
            writes.awaiting("n", t0),
            "a newer version with the old labels is still older than our write"
        );
        writes.observe("n", &ours);
        assert!(!writes.awaiting("n", t0), "the cache caught up");
        assert!(!writes.awaiting("other", t0));
    }

    #[test]
    fn an_event_that_came_before_the_response_records_nothing() {
        let writes = OwnWrites::default();
        let ours = labels(&[("x", "1")]);
        let t0 = Instant::now();
        writes.record("n", fingerprint(&ours), t0, |_| Some(fingerprint(&ours)));
        assert!(!writes.awaiting("n", t0));
    }

    #[test]
    fn an_entry_expires_so_a_skipped_event_cannot_hold_a_node_forever() {
        let writes = OwnWrites::default();
        let t0 = Instant::now();
        writes.record("n", 1, t0, |_| Some(2));
        assert!(writes.awaiting("n", t0 + Duration::from_secs(29)));
        assert!(!writes.awaiting("n", t0 + Duration::from_secs(31)));
        assert_eq!(writes.len(), 0, "and it is forgotten");
    }

    #[test]
    fn entries_of_deleted_nodes_are_swept_when_the_map_grows() {
        let writes = OwnWrites::default();
        let t0 = Instant::now();
        for i in 0..SWEEP_ABOVE {
            writes.record(&format!("gone-{i}"), 1, t0, |_| Some(2));
        }
        assert_eq!(writes.len(), SWEEP_ABOVE);
        writes.record("kept", 1, t0, |name| (name == "kept").then_some(2));
        assert_eq!(writes.len(), 1);
    }
}
