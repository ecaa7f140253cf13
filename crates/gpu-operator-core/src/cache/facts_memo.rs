//! The cluster facts of the node caches, computed once per change of what they read instead of
//! once per reconcile: every operand reconciler (nine of them, woken together by the same node
//! event) and the status reconciler read the same facts, and the pass over every node costs
//! milliseconds at thousands of nodes. The node and runtime reflectors mark each event that
//! changes what the facts read (a node's labels, a node joining or leaving, a GPU node's
//! container runtime) through a [`Marker`]; [`FactsMemo::get`] reuses the last pass while
//! nothing was marked since.
//!
//! The order that keeps a reused pass current: a marker sets its `pending` flag before its
//! reflector applies the event to the cache, and moves the version (clearing the flag) only after
//! the reflector passed the event on. While any flag is set the memo is bypassed, so a reconcile
//! woken by an event never reads a pass from before it; a pass stored under an older version is
//! simply not reused.

use std::sync::{
    Arc, Mutex, PoisonError,
    atomic::{AtomicBool, AtomicU64, Ordering},
};

use crate::cache::{facts::ClusterFacts, node_meta::NodeMeta, node_runtime::NodeRuntime};

/// Whether a node's update changes what the facts read of it: its labels.
pub fn node_changed(old: &NodeMeta, new: &NodeMeta) -> bool {
    old.labels() != new.labels()
}

/// Whether a GPU node's update changes what the facts read of it: its container runtime.
pub fn runtime_changed(old: &NodeRuntime, new: &NodeRuntime) -> bool {
    old.container_runtime_version != new.container_runtime_version
}

/// The version of the node facts and the last pass, shared by the reflectors and the reconcilers.
#[derive(Debug, Default)]
pub struct FactsMemo {
    /// Moves once per applied change of what the facts read.
    version: AtomicU64,
    /// One flag per marking reflector: set while its change is being applied.
    pending: Mutex<Vec<Arc<AtomicBool>>>,
    /// The last pass and the version it was computed at.
    last: Mutex<Option<(u64, Arc<ClusterFacts>)>>,
}

/// How [`FactsMemo::get`] came by its facts (for tests and the bench).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The last pass, still current.
    Reused,
    /// A new pass, stored for the next reader.
    Computed,
    /// A new pass while a change was being applied (not stored).
    Bypassed,
}

impl FactsMemo {
    /// A marker for one reflector whose events may change the facts.
    pub fn marker(&self) -> Marker {
        let pending = Arc::new(AtomicBool::new(false));
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(pending.clone());
        Marker { pending }
    }

    /// Moves the version if `marker` flagged a change (after its event was applied and passed on).
    pub fn settle(&self, marker: &Marker) {
        if marker.pending.swap(false, Ordering::SeqCst) {
            self.version.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// The node facts: the last pass while nothing changed since, or `compute()` run now. Readers
    /// that find the memo stale wait for one another, so a burst of reconciles runs one pass.
    pub fn get(&self, compute: impl FnOnce() -> ClusterFacts) -> (Arc<ClusterFacts>, Source) {
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        let version = self.version.load(Ordering::SeqCst);
        if self.changing() {
            return (Arc::new(compute()), Source::Bypassed);
        }
        if let Some((at, facts)) = last.as_ref()
            && *at == version
        {
            return (facts.clone(), Source::Reused);
        }
        let facts = Arc::new(compute());
        *last = Some((version, facts.clone()));
        (facts, Source::Computed)
    }

    fn changing(&self) -> bool {
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .any(|p| p.load(Ordering::SeqCst))
    }
}

/// One reflector's handle on a [`FactsMemo`]: [`Marker::mark`] before the event is applied,
/// [`FactsMemo::settle`] after it was passed on.
#[derive(Debug)]
pub struct Marker {
    pending: Arc<AtomicBool>,
}

impl Marker {
    /// Flags that the event about to be applied changes what the facts read.
    pub fn mark(&self) {
        self.pending.store(true, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

    fn facts(gpu_nodes: usize) -> ClusterFacts {
        ClusterFacts {
            gpu_nodes,
            ..ClusterFacts::default()
        }
    }

    #[test]
    fn a_pass_is_reused_until_a_marked_change_was_applied() {
        let memo = FactsMemo::default();
        let marker = memo.marker();
        let passes = AtomicUsize::new(0);
        // The "cache": what a pass reads.
        let nodes = AtomicUsize::new(1);
        let pass = || {
            passes.fetch_add(1, Ordering::SeqCst);
            facts(nodes.load(Ordering::SeqCst))
        };
        assert_eq!(memo.get(pass).1, Source::Computed);
        let (reused, source) = memo.get(pass);
        assert_eq!((reused.gpu_nodes, source), (1, Source::Reused));
        assert_eq!(passes.load(Ordering::SeqCst), 1, "nine readers, one pass");

        // A node joins: marked, applied to the cache, passed on to the reconcilers (which read
        // the facts before the reflector settles), then settled.
        marker.mark();
        nodes.store(2, Ordering::SeqCst);
        let (during, source) = memo.get(pass);
        assert_eq!(
            (during.gpu_nodes, source),
            (2, Source::Bypassed),
            "a reconcile woken by the event sees it"
        );
        memo.settle(&marker);
        let (after, source) = memo.get(pass);
        assert_eq!((after.gpu_nodes, source), (2, Source::Computed));
        assert_eq!(memo.get(pass).1, Source::Reused);

        // Settling without a mark (an event that changed nothing the facts read) keeps the pass.
        memo.settle(&marker);
        assert_eq!(memo.get(pass).1, Source::Reused);
        assert_eq!(passes.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn every_markers_change_is_seen() {
        let memo = FactsMemo::default();
        let (nodes, runtimes) = (memo.marker(), memo.marker());
        assert_eq!(memo.get(|| facts(1)).1, Source::Computed);
        runtimes.mark();
        assert_eq!(memo.get(|| facts(1)).1, Source::Bypassed);
        memo.settle(&nodes);
        assert_eq!(
            memo.get(|| facts(1)).1,
            Source::Bypassed,
            "settling one reflector leaves the other's change pending"
        );
        memo.settle(&runtimes);
        assert_eq!(memo.get(|| facts(1)).1, Source::Computed);
    }
}
