//! Writing one reconciler's condition into `ClusterPolicy.status.conditions` with server-side
//! apply: the list is a map keyed by `type`, so each condition is an entry of its own, and the
//! conditions of reconcilers that change at once go in one request (see
//! [`crate::pipeline::status_batch`]). Nothing is sent when the live condition already says the
//! same; [`write_gated`] also holds back changes that move nothing a user reads at a glance (see
//! [`crate::pipeline::write_gate`]).

use std::time::{Duration, Instant};

use gpu_operator_api::ClusterPolicy;
use k8s_openapi::jiff::Timestamp;

pub use crate::report::conditions::Desired;
use crate::{
    Context,
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
/// the batch). Waits (returns false) while the ClusterPolicy has no status yet: the status
/// reconciler sets the required `state` first, and its write triggers this reconciler again.
pub fn write(ctx: &Context, policy: &ClusterPolicy, reconciler: &str, desired: &Desired) -> bool {
    let Some(status) = &policy.status else {
        return false;
    };
    let live = status.conditions.as_deref().unwrap_or_default();
    if conditions::is_current(live, desired, policy.metadata.generation) {
        return false;
    }
    send(ctx, policy, reconciler, desired);
    true
}

/// Like [`write`], but gated (see [`crate::pipeline::write_gate`]): a condition becoming `True` is
/// written at once, another move of its status, reason, acknowledged generation or progress step
/// after its burst, a change of the message alone once it held still.
pub fn write_gated(
    ctx: &Context,
    policy: &ClusterPolicy,
    reconciler: &str,
    desired: &Desired,
) -> Outcome {
    let Some(status) = &policy.status else {
        return Outcome::Current;
    };
    let live = status.conditions.as_deref().unwrap_or_default();
    let generation = policy.metadata.generation;
    let key = gate_key(policy, &desired.type_);
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
            send(ctx, policy, reconciler, desired);
            ctx.status_gate.written(&key, desired.step);
            Outcome::Written
        }
    }
}

/// The [`crate::pipeline::write_gate::WriteGate`] key of condition `type_` of `policy`.
pub fn gate_key(policy: &ClusterPolicy, type_: &str) -> String {
    format!(
        "{}/{type_}",
        policy.metadata.uid.as_deref().unwrap_or_default()
    )
}

/// Puts `desired` in the batch of `policy` (see [`crate::pipeline::status_batch`]).
fn send(ctx: &Context, policy: &ClusterPolicy, reconciler: &str, desired: &Desired) {
    let live = policy
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    let condition = conditions::merge(live, desired, policy.metadata.generation, Timestamp::now());
    tracing::debug!(
        reconciler,
        condition = %desired.type_,
        status = desired.status,
        reason = %desired.reason,
        message = %desired.message,
        "writing condition"
    );
    ctx.status_batch.submit(&ctx.client, policy, condition);
}
