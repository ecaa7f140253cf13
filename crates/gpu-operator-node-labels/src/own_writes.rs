//! Our own label patches that the node cache has not shown yet. Reconciling such a node again
//! (say, because the ClusterPolicy changed meanwhile) would compute the same changes from the
//! stale cached labels and repeat the patch; remembering the version we patched from avoids that.

use std::{
    collections::HashMap,
    sync::{Mutex, PoisonError},
};

/// Entries above which those of deleted nodes are swept.
const SWEEP_ABOVE: usize = 1024;

/// Node name → the `resourceVersion` our last patch of it started from.
#[derive(Debug, Default)]
pub struct OwnWrites(Mutex<HashMap<String, String>>);

impl OwnWrites {
    /// Whether the cached `version` of node `name` is still the one we patched: our write is on
    /// its way and its watch event will trigger another reconcile. Forgets the entry otherwise.
    pub fn awaiting(&self, name: &str, version: Option<&str>) -> bool {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match map.get(name) {
            Some(patched_from) if Some(patched_from.as_str()) == version => true,
            Some(_) => {
                map.remove(name);
                false
            }
            None => false,
        }
    }

    /// Records that we patched node `name` from `patched_from`; `exists` says which nodes still
    /// exist, to forget deleted ones when the map grows.
    pub fn record(&self, name: &str, patched_from: String, exists: impl Fn(&str) -> bool) {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if map.len() >= SWEEP_ABOVE {
            map.retain(|name, _| exists(name));
        }
        map.insert(name.to_owned(), patched_from);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.lock().map(|m| m.len()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_is_skipped_until_the_cache_shows_a_newer_version() {
        let writes = OwnWrites::default();
        assert!(!writes.awaiting("a", Some("1")));
        writes.record("a", "1".to_owned(), |_| true);
        assert!(
            writes.awaiting("a", Some("1")),
            "the cache still has the old version"
        );
        assert!(writes.awaiting("a", Some("1")), "until it moves on");
        assert!(!writes.awaiting("a", Some("2")), "the cache caught up");
        assert!(!writes.awaiting("a", Some("1")), "and the entry is gone");
        assert!(!writes.awaiting("b", None));
    }

    #[test]
    fn entries_of_deleted_nodes_are_swept_when_the_map_grows() {
        let writes = OwnWrites::default();
        for i in 0..SWEEP_ABOVE {
            writes.record(&format!("gone-{i}"), "1".to_owned(), |_| false);
        }
        assert_eq!(writes.len(), SWEEP_ABOVE);
        writes.record("kept", "1".to_owned(), |_| false);
        assert_eq!(writes.len(), 1);
    }
}
