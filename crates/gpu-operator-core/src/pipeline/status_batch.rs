//! One status request of an owner (a ClusterPolicy, …) for everything its reconcilers change at
//! once. A spec change wakes every operand, the driver upgrade and the validators' summary, and
//! each acknowledges the new generation in its own condition within moments of the others; the
//! owner's overall status (`state`, `Ready`, `Error`) then acknowledges it too. Written one by one
//! that was a status patch per reconciler per change and one more for the overall status. Here a
//! burst is sent once it has been quiet for [`WINDOW`], or [`LONGEST`] after its first condition;
//! a burst that acknowledges a new generation waits for every reconciler of this process to have
//! acknowledged it (the driver upgrade reads every node first), up to [`ACKNOWLEDGED`]. One
//! server-side apply (field manager [`FIELD_MANAGER`]) carries it all: the
//! conditions, and the overall status as the kind's [`Summarizer`] finds it from those very
//! conditions (registered by the status reconciler of the kind), so the overall status follows
//! its operands in the same request instead of the next. A task of its own sends it, so a
//! reconcile dropped meanwhile (overtaken by a newer spec) loses nothing; a failed request is
//! tried again with what came since.
//!
//! Server-side apply removes what a field manager applied before and leaves out now, so every
//! request carries everything this manager owns: the last sent of each condition and of each
//! overall field ([`Owner::STATUS_FIELDS`]), and, for one this process has not sent yet, the live
//! one (a restart must not drop what the previous process wrote).

use std::{
    any::{Any, TypeId},
    collections::{BTreeMap, BTreeSet, HashMap},
    fmt,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use tokio::time::Instant;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{
    Api, ResourceExt as _,
    api::{Patch, PatchParams},
};
use serde_json::{Map, Value, json};

use crate::contract::Owner;

/// How long a burst must be quiet before it is sent: longer than the gap between the reconciles
/// one change wakes (they are lined up by the write gate's burst), short enough that a user
/// watching sees no delay.
pub const WINDOW: Duration = Duration::from_millis(300);

/// How long a burst that never falls quiet (a rollout's stream of progress) waits at most after
/// its first condition.
pub const LONGEST: Duration = Duration::from_secs(2);

/// How long a burst that acknowledges a new generation waits at most after its first condition
/// for the reconcilers of this process that have not acknowledged it yet (the driver upgrade,
/// which reads every node; an operand waiting for its DaemonSet's first status): a spec change is
/// recorded once, when every reconciler has observed it.
pub const ACKNOWLEDGED: Duration = Duration::from_secs(5);

/// The field manager of the status requests.
pub const FIELD_MANAGER: &str = "gpu-operator/status";

/// How long a failed request waits before it is tried again (with what came meanwhile).
const RETRY: Duration = Duration::from_secs(2);

/// An owner's overall status as a request carries it: its fields (`state`, `namespace`, …, see
/// [`Owner::STATUS_FIELDS`]) and its overall conditions (`Ready`, `Error`), as written (merged
/// with the live ones).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Overall {
    /// The overall fields.
    pub fields: Map<String, Value>,
    /// The overall conditions.
    pub conditions: Vec<Condition>,
}

/// What the status request about to go leaves of an owner's status: every condition it carries
/// and the overall fields.
#[derive(Clone, Copy, Debug)]
pub struct Outgoing<'a> {
    /// The conditions, by type.
    pub conditions: &'a [Condition],
    /// The overall fields.
    pub fields: &'a Map<String, Value>,
}

/// A kind's overall status found from what a request is about to carry (the newest object of
/// the owner, the outgoing status): the overall status that request should carry instead, or
/// `None` to carry it as it is.
pub type Summarizer<K> = Arc<dyn Fn(&K, Outgoing<'_>) -> Option<Overall> + Send + Sync>;

/// The batches, by owner uid, and the summarizers, by owner kind.
#[derive(Clone, Default)]
pub struct StatusBatch {
    batches: Arc<Mutex<HashMap<String, Batch>>>,
    summarizers: Arc<Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>>,
}

impl fmt::Debug for StatusBatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let batches = self.batches.lock().map_or(0, |b| b.len());
        f.debug_struct("StatusBatch")
            .field("batches", &batches)
            .finish_non_exhaustive()
    }
}

/// One owner's batch.
#[derive(Default)]
struct Batch {
    /// Every condition the next request carries, by type (see the module docs).
    owned: BTreeMap<String, Condition>,
    /// The overall fields the next request carries.
    fields: Map<String, Value>,
    /// The newest object of the owner submitted, for the summarizer.
    latest: Option<Arc<dyn Any + Send + Sync>>,
    /// Whether anything came since the last request.
    pending: bool,
    /// The types of the conditions that came since the last request, for the log.
    changed: BTreeSet<String>,
    /// The types of the conditions this process's reconcilers submitted, whose acknowledgement of
    /// a new generation a burst waits for.
    reconciled: BTreeSet<String>,
    /// Whether a caller is waiting out the window to send the batch.
    sending: bool,
    /// When the first and the last condition since the last request came.
    burst: Option<(Instant, Instant)>,
}

/// What one request carries.
struct Request {
    conditions: Vec<Condition>,
    fields: Map<String, Value>,
    latest: Option<Arc<dyn Any + Send + Sync>>,
}

/// Whether a submission opened a batch.
#[derive(Debug, PartialEq, Eq)]
enum Turn {
    /// A batch is open already; this goes with it.
    Queued,
    /// It opened one: a sender waits [`WINDOW`], then takes and sends it.
    Send,
}

impl StatusBatch {
    /// Puts `condition` in the batch of `owner`, and starts the batch's sender when it opens one.
    pub fn submit<K: Owner>(&self, client: &kube::Client, owner: &K, condition: Condition) {
        self.submit_all(client, owner, vec![condition], None);
    }

    /// Puts the overall status of `owner` in its batch (see [`submit`](Self::submit)).
    pub fn submit_overall<K: Owner>(&self, client: &kube::Client, owner: &K, overall: Overall) {
        self.submit_all(client, owner, overall.conditions, Some(overall.fields));
    }

    /// Finds the overall status of every request for an owner of kind `K` with `summarize`.
    pub fn summarize_with<K: Owner>(&self, summarize: Summarizer<K>) {
        let mut map = self
            .summarizers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        map.insert(TypeId::of::<K>(), Arc::new(summarize));
    }

    /// The condition `type_` of `owner` as its next status request carries it (a reconciler's
    /// acknowledgement waiting in the batch), if this process has one.
    pub fn condition<K: Owner>(&self, owner: &K, type_: &str) -> Option<Condition> {
        let map = self.batches.lock().unwrap_or_else(PoisonError::into_inner);
        map.get(&uid(owner))?.owned.get(type_).cloned()
    }

    fn submit_all<K: Owner>(
        &self,
        client: &kube::Client,
        owner: &K,
        conditions: Vec<Condition>,
        overall: Option<Map<String, Value>>,
    ) {
        if self.enqueue(owner, conditions, overall) == Turn::Send {
            let (batches, client) = (self.clone(), client.clone());
            let (name, uid) = (owner.name_any(), uid(owner));
            tokio::spawn(async move { batches.send::<K>(&client, &name, &uid).await });
        }
    }

    /// Sends the batch of the owner of kind `K` with `uid` (named `name`) after [`WINDOW`], again
    /// while more came during a request, until nothing did.
    async fn send<K: Owner>(&self, client: &kube::Client, name: &str, uid: &str) {
        let api: Api<K> = Api::all(client.clone());
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let mut wait = WINDOW;
        loop {
            tokio::time::sleep(wait).await;
            if let Some(more) = self.quiet_in(uid, Instant::now()) {
                wait = more;
                continue;
            }
            let Some(request) = self.take::<K>(uid) else {
                return;
            };
            let types: Vec<&str> = request
                .conditions
                .iter()
                .map(|c| c.type_.as_str())
                .collect();
            tracing::debug!(owner = name, conditions = ?types, "writing the status");
            let mut status = request.fields.clone();
            status.insert("conditions".to_owned(), json!(request.conditions));
            let patch = json!({
                "apiVersion": K::api_version(&()),
                "kind": K::kind(&()),
                "status": status,
            });
            wait = match api.patch_status(name, &params, &Patch::Apply(&patch)).await {
                Ok(_) => WINDOW,
                Err(kube::Error::Api(response)) if response.code == 404 => {
                    self.forget(uid);
                    return;
                }
                Err(error) => {
                    tracing::warn!(%error, owner = name, conditions = ?types, "could not write the status; trying again");
                    self.failed(uid);
                    RETRY
                }
            };
        }
    }

    /// Adds `conditions` to the batch of `owner`, with `overall`'s fields when they are its overall
    /// status (else a reconciler's); says whether it opened the batch.
    fn enqueue<K: Owner>(
        &self,
        owner: &K,
        conditions: Vec<Condition>,
        overall: Option<Map<String, Value>>,
    ) -> Turn {
        let mut map = self.batches.lock().unwrap_or_else(PoisonError::into_inner);
        let batch = map.entry(uid(owner)).or_default();
        for live in owner.conditions().unwrap_or_default() {
            batch
                .owned
                .entry(live.type_.clone())
                .or_insert_with(|| live.clone());
        }
        // The owner is serialised to read its live fields only while the batch lacks one.
        if K::STATUS_FIELDS
            .iter()
            .any(|field| !batch.fields.contains_key(*field))
        {
            for (key, value) in live_fields(owner) {
                batch.fields.entry(key).or_insert(value);
            }
        }
        for condition in conditions {
            if overall.is_none() {
                batch.reconciled.insert(condition.type_.clone());
            }
            batch.changed.insert(condition.type_.clone());
            batch.owned.insert(condition.type_.clone(), condition);
        }
        batch.fields.extend(overall.unwrap_or_default());
        batch.latest = Some(Arc::new(owner.clone()));
        batch.pending = true;
        let now = Instant::now();
        batch.burst = Some(batch.burst.map_or((now, now), |(first, _)| (first, now)));
        if batch.sending {
            Turn::Queued
        } else {
            batch.sending = true;
            Turn::Send
        }
    }

    /// How much longer the burst of the owner with `uid` waits at `now`: until it has been quiet for
    /// [`WINDOW`], and no later than [`LONGEST`] after its first condition; while a reconciler has
    /// not acknowledged the generation another one did, until it has, and no later than
    /// [`ACKNOWLEDGED`] after the first condition (looked at again every [`WINDOW`]); `None` when
    /// it is due.
    fn quiet_in(&self, uid: &str, now: Instant) -> Option<Duration> {
        let map = self.batches.lock().unwrap_or_else(PoisonError::into_inner);
        let batch = map.get(uid)?;
        let (first, last) = batch.burst?;
        if batch.lagging() && first + ACKNOWLEDGED > now {
            return Some((first + ACKNOWLEDGED - now).min(WINDOW));
        }
        let due = (last + WINDOW).min(first + LONGEST);
        (due > now).then(|| due - now)
    }

    /// The status to send for the owner of kind `K` with `uid` now, its overall part as the kind's
    /// summarizer finds it; or `None` (and the batch closed) when nothing came since the last
    /// request.
    fn take<K: Owner>(&self, uid: &str) -> Option<Request> {
        let request = self.take_raw(uid)?;
        let Some(summarize) = self.summarizer::<K>() else {
            return Some(request);
        };
        let Some(owner) = request
            .latest
            .as_ref()
            .and_then(|latest| latest.downcast_ref::<K>())
        else {
            return Some(request);
        };
        let outgoing = Outgoing {
            conditions: &request.conditions,
            fields: &request.fields,
        };
        let Some(overall) = summarize(owner, outgoing) else {
            return Some(request);
        };
        // What this request carries, the next carries too (unless newer).
        let mut map = self.batches.lock().unwrap_or_else(PoisonError::into_inner);
        let batch = map.entry(uid.to_owned()).or_default();
        for condition in &overall.conditions {
            batch
                .owned
                .insert(condition.type_.clone(), condition.clone());
        }
        batch.fields.extend(overall.fields);
        Some(Request {
            conditions: batch.owned.values().cloned().collect(),
            fields: batch.fields.clone(),
            latest: request.latest,
        })
    }

    /// The batch of the owner with `uid` as it is, or `None` (and the batch closed) when nothing
    /// came since the last request.
    fn take_raw(&self, uid: &str) -> Option<Request> {
        let mut map = self.batches.lock().unwrap_or_else(PoisonError::into_inner);
        let batch = map.entry(uid.to_owned()).or_default();
        if !batch.pending {
            batch.sending = false;
            return None;
        }
        batch.pending = false;
        batch.burst = None;
        let changed = std::mem::take(&mut batch.changed);
        tracing::debug!(
            owner = uid,
            ?changed,
            "status changed since the last request"
        );
        Some(Request {
            conditions: batch.owned.values().cloned().collect(),
            fields: batch.fields.clone(),
            latest: batch.latest.clone(),
        })
    }

    fn summarizer<K: Owner>(&self) -> Option<Summarizer<K>> {
        let map = self
            .summarizers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        map.get(&TypeId::of::<K>())?
            .downcast_ref::<Summarizer<K>>()
            .cloned()
    }

    /// After a failed request: what it carried goes with the next.
    fn failed(&self, uid: &str) {
        let mut map = self.batches.lock().unwrap_or_else(PoisonError::into_inner);
        map.entry(uid.to_owned()).or_default().pending = true;
    }

    /// Drops the batch of an owner that is gone.
    fn forget(&self, uid: &str) {
        let mut map = self.batches.lock().unwrap_or_else(PoisonError::into_inner);
        map.remove(uid);
    }
}

impl Batch {
    /// Whether a reconciler of this process has not acknowledged the newest generation another
    /// one did.
    fn lagging(&self) -> bool {
        let generations = || {
            self.reconciled
                .iter()
                .filter_map(|type_| self.owned.get(type_)?.observed_generation)
        };
        generations()
            .max()
            .is_some_and(|newest| generations().any(|g| g < newest))
    }
}

fn uid<K: Owner>(owner: &K) -> String {
    owner.meta().uid.clone().unwrap_or_default()
}

/// The overall fields ([`Owner::STATUS_FIELDS`]) of `owner`'s live status.
fn live_fields<K: Owner>(owner: &K) -> Map<String, Value> {
    let Ok(Value::Object(mut object)) = serde_json::to_value(owner) else {
        return Map::new();
    };
    let Some(Value::Object(status)) = object.remove("status") else {
        return Map::new();
    };
    status
        .into_iter()
        .filter(|(key, value)| K::STATUS_FIELDS.contains(&key.as_str()) && !value.is_null())
        .collect()
}

#[cfg(test)]
mod tests;
