//! A cached node's labels, compact: one sorted slice of shared `key=value` pairs per node. At
//! 50,000 nodes the node cache is the operator's largest structure, and the labels are most of
//! it, yet nearly every pair repeats across nodes (NFD's CPU features, GFD's product and driver
//! labels, ours). So each distinct pair exists once and a node holds a thin pointer to it: 8 bytes
//! a label, where a `BTreeMap` costs over 100 and a slice of two shared strings 32.
//!
//! Pairs and keys no node uses any more (a host name of a node that left) are dropped whenever a
//! set has doubled since its last sweep, so node churn does not grow them.

use std::{
    borrow::Borrow,
    collections::{BTreeMap, HashSet},
    hash::Hash,
    sync::{Arc, LazyLock, Mutex, PoisonError},
};

use serde::{Serialize, Serializer, ser::SerializeMap as _};

/// A node's labels, sorted by key. Serializes as the JSON map the API server holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Labels(Box<[Arc<Label>]>);

/// One `key=value` pair, shared by every node that has it.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Label {
    key: Arc<str>,
    value: Box<str>,
}

impl Labels {
    /// The value of label `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .binary_search_by(|label| label.key.as_ref().cmp(key))
            .ok()
            .map(|i| self.0[i].value.as_ref())
    }

    /// Every label, by key.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|l| (l.key.as_ref(), l.value.as_ref()))
    }

    /// Every label key, sorted.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|l| l.key.as_ref())
    }

    /// Whether the node has no labels.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Labels from `(key, value)` pairs (for tests and fixtures).
    pub fn from_pairs(labels: &[(&str, &str)]) -> Self {
        Self::from(
            labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>(),
        )
    }

    /// The labels as the map the label rules take.
    pub fn to_map(&self) -> BTreeMap<String, String> {
        self.iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }
}

impl From<BTreeMap<String, String>> for Labels {
    fn from(labels: BTreeMap<String, String>) -> Self {
        let mut shared = SHARED.lock().unwrap_or_else(PoisonError::into_inner);
        // The map iterates in key order, so the slice is sorted for `get`'s binary search.
        Self(
            labels
                .into_iter()
                .map(|(key, value)| shared.label(&key, value))
                .collect(),
        )
    }
}

impl Serialize for Labels {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.iter() {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

/// The label pairs and keys of the cached nodes.
static SHARED: LazyLock<Mutex<Interner>> = LazyLock::new(Mutex::default);

/// Size below which a shared set is never swept.
const SWEEP_FROM: usize = 1024;

/// The shared pairs, and their keys (a key repeats across pairs: `cpu-model.id=143` and `=207`).
#[derive(Default)]
struct Interner {
    keys: Interned<str>,
    labels: Interned<Label>,
}

impl Interner {
    /// The shared pair `key=value`.
    fn label(&mut self, key: &str, value: String) -> Arc<Label> {
        let key = match self.keys.find(key) {
            Some(key) => key,
            None => self.keys.insert(Arc::from(key)),
        };
        let label = Label {
            key,
            value: value.into_boxed_str(),
        };
        match self.labels.find(&label) {
            Some(label) => label,
            None => self.labels.insert(Arc::new(label)),
        }
    }
}

/// One set of shared values, swept of those nobody holds whenever it has doubled.
struct Interned<T: ?Sized> {
    set: HashSet<Arc<T>>,
    sweep_at: usize,
}

impl<T: ?Sized> Default for Interned<T> {
    fn default() -> Self {
        Self {
            set: HashSet::new(),
            sweep_at: 0,
        }
    }
}

impl<T: ?Sized + Eq + Hash> Interned<T> {
    /// The shared value equal to `value`, if there is one.
    fn find<Q>(&self, value: &Q) -> Option<Arc<T>>
    where
        Arc<T>: Borrow<Q>,
        Q: ?Sized + Eq + Hash,
    {
        self.set.get(value).cloned()
    }

    /// Shares `new` (sweeping the set first when it has doubled).
    fn insert(&mut self, new: Arc<T>) -> Arc<T> {
        if self.set.len() >= self.sweep_at.max(SWEEP_FROM) {
            self.set.retain(|s| Arc::strong_count(s) > 1);
            self.sweep_at = self.set.len() * 2;
        }
        self.set.insert(new.clone());
        new
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn labels_look_up_iterate_and_serialize_like_the_map_they_came_from() {
        let map: BTreeMap<String, String> =
            [("b", "2"), ("a", "1"), ("c", "a-long-host-name-0042")]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
        let labels = Labels::from(map.clone());
        assert_eq!(labels.keys().collect::<Vec<_>>(), ["a", "b", "c"]);
        for (k, v) in &map {
            assert_eq!(labels.get(k), Some(v.as_str()));
        }
        assert_eq!(labels.get("d"), None);
        assert_eq!(labels.to_map(), map);
        assert_eq!(serde_json::to_value(&labels).unwrap(), json!(map));
        assert!(Labels::default().is_empty() && !labels.is_empty());
    }

    #[test]
    fn pairs_and_keys_are_shared_between_nodes() {
        let labels = |host: &str| {
            Labels::from_pairs(&[
                ("nvidia.com/gpu.present", "true"),
                ("kubernetes.io/hostname", host),
            ])
        };
        let (a, b) = (labels("node-a"), labels("node-b"));
        assert!(Arc::ptr_eq(&a.0[1], &b.0[1]), "one pair");
        assert!(
            !Arc::ptr_eq(&a.0[0], &b.0[0]),
            "host names are the nodes' own"
        );
        assert!(Arc::ptr_eq(&a.0[0].key, &b.0[0].key), "one key");
        assert_eq!(a, labels("node-a"), "equal by content");
        assert_ne!(a, b);
    }

    #[test]
    fn values_nobody_holds_are_swept_once_the_set_has_doubled() {
        let mut interned = Interned::<str>::default();
        let kept = interned.insert(Arc::from("kept"));
        for i in 0..SWEEP_FROM * 3 {
            drop(interned.insert(Arc::from(format!("gone-{i}").as_str())));
        }
        assert!(interned.set.len() <= SWEEP_FROM, "{}", interned.set.len());
        assert!(
            interned
                .find("kept")
                .is_some_and(|k| Arc::ptr_eq(&k, &kept)),
            "a value in use stays"
        );
    }
}
