//! One status request of an owner (a ClusterPolicy, …) for the conditions that many reconcilers
//! change at once. A spec change wakes every operand, the driver upgrade and the validators' summary, and each
//! acknowledges the new generation in its own condition within moments of the others; written one
//! by one that was a status patch per reconciler per change. Here a burst is sent once it has been
//! quiet for [`WINDOW`] (a reconciler that takes longer, such as the driver upgrade reading every
//! node, still joins it), or [`LONGEST`] after its first condition, and one server-side apply
//! (field manager [`FIELD_MANAGER`]) carries them all. A task of its own sends it, so a reconcile dropped meanwhile (overtaken by a
//! newer spec) loses nothing; a failed request is tried again with what came since.
//!
//! Server-side apply removes what a field manager applied before and leaves out now, so every
//! request carries every condition this manager owns: the last one sent of each type, and, for a
//! type this process has not sent yet, the live one (a restart must not drop what the previous
//! process wrote). The overall conditions ([`Owner::OVERALL_CONDITIONS`]: `Ready`, `Error`)
//! belong to the status reconciler and are never carried.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use tokio::time::Instant;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{
    Api, ResourceExt as _,
    api::{Patch, PatchParams},
};
use serde_json::json;

use crate::contract::Owner;

/// How long a burst must be quiet before it is sent: longer than the gap between the reconciles
/// one change wakes (they are lined up by the write gate's burst), short enough that a user
/// watching sees no delay.
pub const WINDOW: Duration = Duration::from_millis(300);

/// How long a burst that never falls quiet (a rollout's stream of progress) waits at most after
/// its first condition.
pub const LONGEST: Duration = Duration::from_secs(2);

/// The field manager of the per-reconciler conditions.
pub const FIELD_MANAGER: &str = "gpu-operator/conditions";

/// How long a failed request waits before it is tried again (with what came meanwhile).
const RETRY: Duration = Duration::from_secs(2);

/// The batches, by owner uid.
#[derive(Clone, Debug, Default)]
pub struct StatusBatch(Arc<Mutex<HashMap<String, Batch>>>);

/// One owner's batch.
#[derive(Debug, Default)]
struct Batch {
    /// Every condition the next request carries, by type (see the module docs).
    owned: BTreeMap<String, Condition>,
    /// Whether any condition came since the last request.
    pending: bool,
    /// The types of the conditions that came since the last request, for the log.
    changed: BTreeSet<String>,
    /// Whether a caller is waiting out the window to send the batch.
    sending: bool,
    /// When the first and the last condition since the last request came.
    burst: Option<(Instant, Instant)>,
}

/// Whether a condition opened a batch.
#[derive(Debug, PartialEq, Eq)]
enum Turn {
    /// A batch is open already; this condition goes with it.
    Queued,
    /// It opened one: a sender waits [`WINDOW`], then takes and sends it.
    Send,
}

impl StatusBatch {
    /// Puts `condition` in the batch of `owner`, and starts the batch's sender when it opens one.
    pub fn submit<K: Owner>(&self, client: &kube::Client, owner: &K, condition: Condition) {
        if self.enqueue(owner, condition) == Turn::Send {
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
            let Some(batch) = self.take(uid) else {
                return;
            };
            let types: Vec<&str> = batch.iter().map(|c| c.type_.as_str()).collect();
            tracing::debug!(owner = name, conditions = ?types, "writing conditions");
            let patch = json!({
                "apiVersion": K::api_version(&()),
                "kind": K::kind(&()),
                "status": { "conditions": batch },
            });
            wait = match api.patch_status(name, &params, &Patch::Apply(&patch)).await {
                Ok(_) => WINDOW,
                Err(kube::Error::Api(response)) if response.code == 404 => {
                    self.forget(uid);
                    return;
                }
                Err(error) => {
                    tracing::warn!(%error, owner = name, conditions = ?types, "could not write conditions; trying again");
                    self.failed(uid);
                    RETRY
                }
            };
        }
    }

    /// Adds `condition` to the batch of `owner`; says whether it opened the batch.
    fn enqueue<K: Owner>(&self, owner: &K, condition: Condition) -> Turn {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let batch = map.entry(uid(owner)).or_default();
        for live in owner.conditions().unwrap_or_default() {
            if !K::OVERALL_CONDITIONS.contains(&live.type_.as_str()) {
                batch
                    .owned
                    .entry(live.type_.clone())
                    .or_insert_with(|| live.clone());
            }
        }
        batch.changed.insert(condition.type_.clone());
        batch.owned.insert(condition.type_.clone(), condition);
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
    /// [`WINDOW`], and no later than [`LONGEST`] after its first condition; `None` when it is due.
    fn quiet_in(&self, uid: &str, now: Instant) -> Option<Duration> {
        let map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let (first, last) = map.get(uid)?.burst?;
        let due = (last + WINDOW).min(first + LONGEST);
        (due > now).then(|| due - now)
    }

    /// The conditions to send for the owner with `uid` now, or `None` (and the batch closed) when
    /// nothing came since the last request.
    fn take(&self, uid: &str) -> Option<Vec<Condition>> {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
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
            "conditions changed since the last request"
        );
        Some(batch.owned.values().cloned().collect())
    }

    /// After a failed request: what it carried goes with the next.
    fn failed(&self, uid: &str) {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        map.entry(uid.to_owned()).or_default().pending = true;
    }

    /// Drops the batch of an owner that is gone.
    fn forget(&self, uid: &str) {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        map.remove(uid);
    }
}

fn uid<K: Owner>(owner: &K) -> String {
    owner.meta().uid.clone().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use gpu_operator_api::{ClusterPolicy, ClusterPolicyStatus, conditions};

    use super::*;

    fn condition(type_: &str, status: &str) -> Condition {
        Condition {
            type_: type_.to_owned(),
            status: status.to_owned(),
            last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ),
            message: String::new(),
            observed_generation: None,
            reason: "Test".to_owned(),
        }
    }

    fn policy(live: Vec<Condition>) -> ClusterPolicy {
        let mut policy = ClusterPolicy::new("p", gpu_operator_api::ClusterPolicySpec::default());
        policy.metadata.uid = Some("u".to_owned());
        policy.status = Some(ClusterPolicyStatus {
            conditions: Some(live),
            ..ClusterPolicyStatus::default()
        });
        policy
    }

    fn types(conditions: &[Condition]) -> Vec<(&str, &str)> {
        conditions
            .iter()
            .map(|c| (c.type_.as_str(), c.status.as_str()))
            .collect()
    }

    #[test]
    fn the_first_condition_opens_a_batch_and_the_rest_join_it() {
        let batch = StatusBatch::default();
        let policy = policy(Vec::new());
        assert_eq!(
            batch.enqueue(&policy, condition("AReady", "False")),
            Turn::Send
        );
        assert_eq!(
            batch.enqueue(&policy, condition("BReady", "True")),
            Turn::Queued
        );
        assert_eq!(
            batch.enqueue(&policy, condition("AReady", "True")),
            Turn::Queued
        );
        let sent = batch.take("u").unwrap();
        assert_eq!(types(&sent), [("AReady", "True"), ("BReady", "True")]);
        // Nothing new: the batch closes, and the next condition opens another.
        assert_eq!(batch.take("u"), None);
        assert_eq!(
            batch.enqueue(&policy, condition("BReady", "False")),
            Turn::Send
        );
    }

    #[test]
    fn a_condition_that_comes_while_sending_goes_in_a_second_request_with_the_first() {
        let batch = StatusBatch::default();
        let policy = policy(Vec::new());
        batch.enqueue(&policy, condition("AReady", "True"));
        assert_eq!(types(&batch.take("u").unwrap()), [("AReady", "True")]);
        assert_eq!(
            batch.enqueue(&policy, condition("BReady", "True")),
            Turn::Queued
        );
        // Server-side apply keeps only what each request carries: both, again.
        assert_eq!(
            types(&batch.take("u").unwrap()),
            [("AReady", "True"), ("BReady", "True")]
        );
        assert_eq!(batch.take("u"), None);
    }

    #[test]
    fn live_conditions_are_carried_except_the_overall_ones() {
        let batch = StatusBatch::default();
        let live = vec![
            condition(conditions::READY, "True"),
            condition(conditions::ERROR, "False"),
            condition("AReady", "True"),
            condition("BReady", "False"),
        ];
        let policy = policy(live);
        batch.enqueue(&policy, condition("BReady", "True"));
        assert_eq!(
            types(&batch.take("u").unwrap()),
            [("AReady", "True"), ("BReady", "True")]
        );
    }

    #[test]
    fn a_failed_request_leaves_its_conditions_for_the_next() {
        let batch = StatusBatch::default();
        let policy = policy(Vec::new());
        batch.enqueue(&policy, condition("AReady", "True"));
        batch.take("u").unwrap();
        batch.failed("u");
        // The sender tries again: the next condition joins, and both go.
        assert_eq!(
            batch.enqueue(&policy, condition("BReady", "True")),
            Turn::Queued
        );
        assert_eq!(
            types(&batch.take("u").unwrap()),
            [("AReady", "True"), ("BReady", "True")]
        );
    }

    #[test]
    fn policies_batch_apart() {
        let batch = StatusBatch::default();
        let first = policy(Vec::new());
        let mut second = policy(Vec::new());
        second.metadata.uid = Some("v".to_owned());
        assert_eq!(
            batch.enqueue(&first, condition("AReady", "True")),
            Turn::Send
        );
        assert_eq!(
            batch.enqueue(&second, condition("AReady", "True")),
            Turn::Send
        );
    }

    #[test]
    fn another_owner_kind_batches_alike_leaving_out_its_own_overall_conditions() {
        use crate::pipeline::test_pool::Pool;
        let batch = StatusBatch::default();
        let mut pool = Pool::new("a", "p1", Some("550"));
        pool.conditions = Some(vec![
            condition("Ready", "False"),
            condition("DriverReady", "False"),
        ]);
        assert_eq!(
            batch.enqueue(&pool, condition("UpgradeReady", "True")),
            Turn::Send
        );
        assert_eq!(
            types(&batch.take("p1").unwrap()),
            [("DriverReady", "False"), ("UpgradeReady", "True")]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_is_sent_once_quiet_and_no_later_than_the_longest_wait() {
        let batch = StatusBatch::default();
        let policy = policy(Vec::new());
        let start = Instant::now();
        batch.enqueue(&policy, condition("AReady", "True"));
        assert_eq!(batch.quiet_in("u", start), Some(WINDOW));
        tokio::time::advance(Duration::from_millis(200)).await;
        batch.enqueue(&policy, condition("BReady", "True"));
        assert_eq!(
            batch.quiet_in("u", Instant::now()),
            Some(WINDOW),
            "a straggler restarts the quiet window"
        );
        assert_eq!(batch.quiet_in("u", Instant::now() + WINDOW), None);
        // A stream that never falls quiet is sent LONGEST after it began.
        tokio::time::advance(Duration::from_millis(1700)).await;
        batch.enqueue(&policy, condition("AReady", "False"));
        assert_eq!(
            batch.quiet_in("u", Instant::now()),
            Some(Duration::from_millis(100))
        );
        assert_eq!(batch.quiet_in("u", start + LONGEST), None);
        batch.take("u").unwrap();
        assert_eq!(batch.quiet_in("u", Instant::now()), None, "nothing waits");
    }
}
