//! The Events the pipeline publishes about an owner. [`publish`] sends one at once (a failure, a
//! warning); [`AppliedEvents`] folds what the operands of one owner wrote within a moment into
//! one `Applied` Event: a repair (a hand edit reverted, a deleted object recreated, a new
//! operator's rendering) wakes every operand it concerns, and each that wrote something said so
//! in an Event of its own — a request per operand per change. A spec change is not a repair: the
//! owner's status records it ([`repairs`]), and an Event would only repeat what the user did.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::{
    ResourceExt as _,
    runtime::events::{Event, EventType, Recorder},
};

use crate::{build::digest, contract::Owner, report::conditions};

/// How long the first write of a burst waits for the other operands' (as the status batch does:
/// [`crate::pipeline::status_batch::WINDOW`]).
const WINDOW: Duration = crate::pipeline::status_batch::WINDOW;

/// Publishes an Event of `type_` and `reason` about the owner `reference`.
pub async fn publish(
    recorder: &Recorder,
    reference: &ObjectReference,
    type_: EventType,
    reason: &str,
    note: &str,
) {
    // The recorder folds an Event into an earlier one with the same type, reason and action,
    // whatever its note, so a new problem of the same kind would only bump the old Event's count:
    // the action carries a digest of the note, and only the same note repeats as a series.
    let note = conditions::truncate(note, 1024);
    let event = Event {
        type_,
        reason: reason.to_owned(),
        action: format!("Reconcile-{}", &digest::of(note.as_bytes())[..8]),
        note: Some(note),
        secondary: None,
    };
    if let Err(error) = recorder.publish(&event, reference).await {
        tracing::warn!(%error, reason, "could not publish an Event");
    }
}

/// Whether what an operand writes at the owner's `generation` repairs something: its condition
/// (in the owner's status, or waiting in the next status request) has already acknowledged that
/// generation — `acknowledged` are their `observedGeneration`s. Otherwise the writes answer a
/// spec change (or the first install), which the condition's `observedGeneration` records.
pub fn repairs(generation: Option<i64>, acknowledged: [Option<i64>; 2]) -> bool {
    generation.is_some() && acknowledged.contains(&generation)
}

/// What the operands wrote per owner, waiting to be published as one `Applied` Event.
#[derive(Clone, Debug, Default)]
pub struct AppliedEvents(Arc<Mutex<HashMap<String, Writes>>>);

/// The objects written per spec section since the owner's last `Applied` Event.
type Writes = BTreeMap<&'static str, usize>;

impl AppliedEvents {
    /// Notes that the operand of `section` wrote `written` objects for `owner`; the first note of
    /// a burst publishes them all after [`WINDOW`].
    pub fn note<K: Owner>(
        &self,
        recorder: &Recorder,
        owner: &K,
        section: &'static str,
        written: usize,
    ) {
        if !self.add(&uid(owner), section, written) {
            return;
        }
        let (events, recorder) = (self.clone(), recorder.clone());
        let (reference, uid) = (owner.object_ref(&()), uid(owner));
        tokio::spawn(async move {
            tokio::time::sleep(WINDOW).await;
            let note = events.take(&uid);
            publish(&recorder, &reference, EventType::Normal, "Applied", &note).await;
        });
    }

    /// Adds a note; true when it opened the owner's burst.
    fn add(&self, uid: &str, section: &'static str, written: usize) -> bool {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let writes = map.entry(uid.to_owned()).or_default();
        let opened = writes.is_empty();
        *writes.entry(section).or_default() += written;
        opened
    }

    /// The Event's note for the owner with `uid` (`devicePlugin: wrote 2 object(s); …`), closing
    /// its burst.
    fn take(&self, uid: &str) -> String {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let writes = map.remove(uid).unwrap_or_default();
        writes
            .iter()
            .map(|(section, written)| format!("{section}: wrote {written} object(s)"))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

fn uid<K: Owner>(owner: &K) -> String {
    owner.uid().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_at_an_acknowledged_generation_are_repairs() {
        assert!(
            repairs(Some(3), [Some(3), None]),
            "acknowledged in the status"
        );
        assert!(
            repairs(Some(3), [Some(2), Some(3)]),
            "acknowledged in the batch"
        );
        assert!(!repairs(Some(3), [Some(2), None]), "a spec change");
        assert!(!repairs(Some(3), [None, None]), "the first install");
        assert!(
            !repairs(None, [None, None]),
            "no generation: nothing to compare"
        );
    }

    #[test]
    fn the_writes_of_a_burst_make_one_note_per_owner() {
        let events = AppliedEvents::default();
        assert!(events.add("u", "gfd", 1), "the first opens the burst");
        assert!(!events.add("u", "devicePlugin", 2));
        assert!(!events.add("u", "gfd", 1));
        assert!(events.add("v", "driver", 1), "another owner has its own");
        assert_eq!(
            events.take("u"),
            "devicePlugin: wrote 2 object(s); gfd: wrote 2 object(s)"
        );
        assert!(
            events.add("u", "gfd", 1),
            "taken: the next write opens another"
        );
        assert_eq!(
            events.take("u"),
            "gfd: wrote 1 object(s)",
            "one operand: as before"
        );
    }
}
