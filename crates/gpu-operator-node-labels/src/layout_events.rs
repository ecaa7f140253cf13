//! Says on the Node why its GPU clients are not scheduled yet: one Event (reason
//! `WaitingForMIGLayout`, about the Node, so `kubectl describe node` shows it) naming the node,
//! the MIG layout it asks for, the state the MIG manager reports and `success`, the state it
//! waits for. Normal while the MIG manager works; Warning once it reports `failed`.
//!
//! Published when a node starts waiting and each time what it waits on changes (the layout, the
//! state), never on a reconcile that finds the same wait: a node label change or the hourly
//! resync wakes the labeller without a new Event. The memory is this process's (a new leader
//! says it once more) and holds only the nodes waiting now.

use std::{
    collections::BTreeMap,
    sync::{Mutex, PoisonError},
};

use gpu_operator_core::Context;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType};

use crate::mig_layout::LayoutWait;

/// Reason of the Event.
pub const REASON: &str = "WaitingForMIGLayout";

/// The waits already published, by node.
#[derive(Debug, Default)]
pub struct LayoutEvents(Mutex<BTreeMap<String, LayoutWait>>);

impl LayoutEvents {
    /// Records that `node` waits as `wait` (`None`: not at all) and returns whether that is new
    /// (so worth an Event). A node that stops waiting is forgotten.
    pub fn first_seen(&self, node: &str, wait: Option<&LayoutWait>) -> bool {
        let mut published = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(wait) = wait else {
            published.remove(node);
            return false;
        };
        if published.get(node) == Some(wait) {
            return false;
        }
        published.insert(node.to_owned(), wait.clone());
        true
    }
}

/// Publishes the Event of `wait` about `node`; a refusal is logged, not retried (the wait is
/// in the log line of every reconcile that finds it new, too).
pub async fn publish(ctx: &Context, node: &str, wait: &LayoutWait) {
    let message = wait.message(node);
    tracing::info!(node, layout = %wait.layout, state = ?wait.state, "{message}");
    let reference = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Node".into()),
        name: Some(node.to_owned()),
        ..ObjectReference::default()
    };
    let event = Event {
        type_: if wait.failed() {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: REASON.to_owned(),
        note: Some(message),
        action: "HoldDeployLabels".to_owned(),
        secondary: None,
    };
    if let Err(error) = ctx.one_off_events.publish(&event, &reference).await {
        tracing::warn!(%error, node, "could not publish the MIG layout Event");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait(layout: &str, state: Option<&str>) -> LayoutWait {
        LayoutWait {
            layout: layout.to_owned(),
            state: state.map(str::to_owned),
            held: vec!["nvidia.com/gpu.deploy.device-plugin".to_owned()],
        }
    }

    #[test]
    fn a_wait_is_published_once_until_it_changes_or_ends() {
        let events = LayoutEvents::default();
        let pending = wait("all-1g.10gb", Some("pending"));
        assert!(events.first_seen("a", Some(&pending)));
        assert!(!events.first_seen("a", Some(&pending)), "same wait");
        assert!(events.first_seen("b", Some(&pending)), "per node");
        assert!(events.first_seen("a", Some(&wait("all-1g.10gb", Some("failed")))));
        assert!(events.first_seen("a", Some(&wait("all-balanced", Some("failed")))));
        assert!(!events.first_seen("a", None), "no wait, no Event");
        assert!(
            events.first_seen("a", Some(&pending)),
            "a wait that comes back is published again"
        );
    }
}
