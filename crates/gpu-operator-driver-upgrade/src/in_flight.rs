//! The state moves this process wrote that the node cache does not show yet (see [`InFlight`]).

use std::{
    collections::{BTreeSet, HashMap},
    sync::{Mutex, PoisonError},
    time::{Duration, Instant},
};

use k8s_openapi::jiff::Timestamp;

use crate::{
    facts::NodeFacts,
    plan::{StateLabel, Step},
    state::{STATE_SINCE, UpgradeState},
};

/// The state moves this process wrote that the node cache may not show yet, by node: the state
/// and the start time written with it, and when. A pass that ran on the older cached state would
/// admit nodes twice over (the admitted ones still look `upgrade-required`) or redo a step, so
/// such a node counts in its written state and is not stepped until the cache shows the write.
#[derive(Default)]
pub struct InFlight(Mutex<HashMap<String, (UpgradeState, Timestamp, Instant)>>);

/// How long a write may take to show in the cache before the cache is believed again.
const CACHE_LAG: Duration = Duration::from_secs(60);

impl InFlight {
    /// Overlays the writes the cache does not show yet on `facts`; returns the nodes in flight.
    pub fn overlay(&self, facts: &mut [NodeFacts]) -> BTreeSet<String> {
        let mut written = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let mut in_flight = BTreeSet::new();
        for node in facts {
            let Some((state, since, at)) = written.get(&node.name).copied() else {
                continue;
            };
            if node.since == Some(since) || at.elapsed() > CACHE_LAG {
                written.remove(&node.name);
            } else {
                node.state = Some(state);
                in_flight.insert(node.name.clone());
            }
        }
        in_flight
    }

    /// Remembers the state `step` wrote on `node`.
    pub fn wrote(&self, node: &str, step: &Step) {
        let since = step.patch.annotations.get(STATE_SINCE).cloned().flatten();
        if let (StateLabel::Set(state), Some(since)) = (step.patch.state, since)
            && let Ok(since) = since.parse()
        {
            let mut written = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            written.insert(node.to_owned(), (state, since, Instant::now()));
        }
    }
}
