//! The [`Owner`] trait: a custom resource whose operands the pipeline reconciles — ClusterPolicy
//! today, NVIDIADriver and GPUCluster next. Everything the pipeline does for an owner (apply with
//! owner references, pruning, leftovers, per-operand conditions and their status requests, the
//! singleton rule, Events) goes through this trait, so a new kind implements it once instead of
//! copying the machinery.

use std::{fmt::Debug, sync::Arc};

use k8s_openapi::{ClusterResourceScope, apimachinery::pkg::apis::meta::v1::Condition};
use kube::{Resource, runtime::reflector::Store};
use serde::{Serialize, de::DeserializeOwned};
use tokio::sync::Notify;

use crate::{
    cache::{
        change_stream::Changes,
        stores::{Stores, Subscriptions},
    },
    contract::Warning,
};

/// A cluster-scoped custom resource that owns operands.
pub trait Owner:
    Resource<DynamicType = (), Scope = ClusterResourceScope>
    + Clone
    + Debug
    + Serialize
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
    /// What its operands validate and render from.
    type Spec: Send + Sync + 'static;

    /// Whether one object of this kind is served per cluster — the oldest, by creation time and
    /// then name; the others are `ignored` — or every one (each NVIDIADriver serves its pool).
    const SINGLETON: bool;

    /// The status fields besides the conditions that its overall status writes (`state`, …):
    /// every status request carries them (see [`crate::pipeline::status_batch`]).
    const STATUS_FIELDS: &'static [&'static str];

    /// The spec.
    fn spec(&self) -> &Self::Spec;

    /// The status conditions; `None` while it has no status yet (its overall status is written
    /// first, and that write wakes the operands again).
    fn conditions(&self) -> Option<&[Condition]>;

    /// The overall state it shows (`ready`, `notReady`, `ignored`), if any: the operands wake
    /// when it moves.
    fn state(&self) -> Option<&str>;

    /// Warnings every operand reports about its own section of the spec (such as a deprecated
    /// field set there). None by default.
    fn section_warnings(&self, _section: &str) -> Vec<Warning> {
        Vec::new()
    }

    /// The status to create before the operands' first condition, for a kind whose status they
    /// cannot create alone (its schema requires a field their conditions do not carry, such as
    /// NVIDIADriver's `state`); `None` (the default) once it has a status, and for a kind whose
    /// own status reconciler writes it first (the ClusterPolicy).
    fn seed_status(&self) -> Option<serde_json::Value> {
        None
    }

    /// The shared cache of this kind.
    fn cache(stores: &Stores) -> &Store<Self>;

    /// Woken after every event of this kind reached the cache, so a reconcile can tell when a
    /// newer spec overtook it.
    fn events(stores: &Stores) -> &Arc<Notify>;

    /// The change stream of this kind, to trigger controllers.
    fn changes(subscriptions: &Subscriptions) -> Changes<Self>;
}
