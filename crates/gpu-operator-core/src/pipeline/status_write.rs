//! Writing one reconciler's condition into its owner's `status.conditions` (a ClusterPolicy's,
//! …) with server-side apply: the list is a map keyed by `type`, so each condition is an entry of its own, and the
//! conditions of reconcilers that change at once go in one request (see
//! [`crate::pipeline::status_batch`]). Nothing is sent when the live condition already says the
//! same; [`write_gated`] also holds back changes that move nothing a user reads at a glance (see
//! [`crate::pipeline::write_gate`]).

use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;

pub use crate::report::conditions::Desired;
use crate::{
    Context,
    contract::Owner,
    pipeline::write_gate::{Decision, Move},
    report::conditions,
};

/// What [`write_gated`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The live condition already says it, or there is no status to write into yet.
    Current,
    /// A request was sent.
    Written,
    /// The change waits; reconcile again after this long.
    Deferred(Duration),
}

/// Writes `desired` for `reconciler` unless it is already current; true if it was sent (put in
/// the batch). Waits (returns false) while the owner has no status yet: the status reconciler
/// sets the required `state` first, and its write triggers this reconciler again.
pub fn write<K: Owner>(ctx: &Context, owner: &K, reconciler: &str, desired: &Desired) -> bool {
    let Some(live) = owner.conditions() else {
        return false;
    };
    if conditions::is_current(live, desired, owner.meta().generation) {
        return false;
    }
    send(ctx, owner, reconciler, desired);
    true
}

/// Like [`write`], but gated (see [`crate::pipeline::write_gate`]): a condition becoming `True` is
/// written at once, another move of its status, reason, acknowledged generation or progress step
/// after its burst, a change of the message alone once it held still.
pub fn write_gated<K: Owner>(
    ctx: &Context,
    owner: &K,
    reconciler: &str,
    desired: &Desired,
) -> Outcome {
    let Some(live) = owner.conditions() else {
        return Outcome::Current;
    };
    let generation = owner.meta().generation;
    let key = gate_key(owner, &desired.type_);
    if conditions::is_current(live, desired, generation) {
        ctx.status_gate.written(&key, desired.step);
        return Outcome::Current;
    }
    let becomes_true = desired.status
        && !live
            .iter()
            .any(|c| c.type_ == desired.type_ && c.status == "True");
    let moved = if becomes_true {
        Move::Ready
    } else if conditions::moved(live, desired, generation) {
        Move::Other
    } else {
        Move::None
    };
    match ctx
        .status_gate
        .decide(&key, moved, desired.step, &desired.message, Instant::now())
    {
        Decision::Wait(after) => Outcome::Deferred(after),
        Decision::Write => {
            send(ctx, owner, reconciler, desired);
            ctx.status_gate.written(&key, desired.step);
            Outcome::Written
        }
    }
}

/// The [`crate::pipeline::write_gate::WriteGate`] key of condition `type_` of `owner`.
pub fn gate_key<K: Owner>(owner: &K, type_: &str) -> String {
    format!(
        "{}/{type_}",
        owner.meta().uid.as_deref().unwrap_or_default()
    )
}

/// Puts `desired` in the batch of `owner` (see [`crate::pipeline::status_batch`]).
fn send<K: Owner>(ctx: &Context, owner: &K, reconciler: &str, desired: &Desired) {
    let live = owner.conditions().unwrap_or_default();
    let condition = conditions::merge(live, desired, owner.meta().generation, Timestamp::now());
    tracing::debug!(
        reconciler,
        condition = %desired.type_,
        status = desired.status,
        reason = %desired.reason,
        message = %desired.message,
        "writing condition"
    );
    ctx.status_batch.submit(&ctx.client, owner, condition);
}
