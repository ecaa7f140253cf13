//! Writing one reconciler's condition into `ClusterPolicy.status.conditions` with server-side
//! apply: the list is a map keyed by `type`, so each reconciler owns its own entry. Nothing is sent
//! when the live condition already says the same; [`write_gated`] also holds back changes that
//! move nothing a user reads at a glance (see [`crate::pipeline::write_gate`]).

use std::time::{Duration, Instant};

use gpu_operator_api::ClusterPolicy;
use k8s_openapi::jiff::Timestamp;
use kube::{
    Api, ResourceExt as _,
    api::{Patch, PatchParams},
};
use serde_json::json;

pub use crate::report::conditions::Desired;
use crate::{
    Context, Error,
    pipeline::{
        apply::FIELD_MANAGER_PREFIX,
        write_gate::{Decision, Move},
    },
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

/// Writes `desired` for `reconciler` unless it is already current; true if a request was sent.
/// Waits (returns false) while the ClusterPolicy has no status yet: the status reconciler sets
/// the required `state` first, and its write triggers this reconciler again.
pub async fn write(
    ctx: &Context,
    policy: &ClusterPolicy,
    reconciler: &str,
    desired: &Desired,
) -> Result<bool, Error> {
    let Some(status) = &policy.status else {
        return Ok(false);
    };
    let live = status.conditions.as_deref().unwrap_or_default();
    if conditions::is_current(live, desired, policy.metadata.generation) {
        return Ok(false);
    }
    send(ctx, policy, reconciler, desired).await?;
    Ok(true)
}

/// Like [`write`], but gated (see [`crate::pipeline::write_gate`]): a condition becoming `True` is
/// written at once, another move of its status, reason, acknowledged generation or progress step
/// after its burst, a change of the message alone once it held still.
pub async fn write_gated(
    ctx: &Context,
    policy: &ClusterPolicy,
    reconciler: &str,
    desired: &Desired,
) -> Result<Outcome, Error> {
    let Some(status) = &policy.status else {
        return Ok(Outcome::Current);
    };
    let live = status.conditions.as_deref().unwrap_or_default();
    let generation = policy.metadata.generation;
    let key = gate_key(policy, &desired.type_);
    if conditions::is_current(live, desired, generation) {
        ctx.status_gate.written(&key, desired.step);
        return Ok(Outcome::Current);
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
        Decision::Wait(after) => Ok(Outcome::Deferred(after)),
        Decision::Write => {
            send(ctx, policy, reconciler, desired).await?;
            ctx.status_gate.written(&key, desired.step);
            Ok(Outcome::Written)
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

async fn send(
    ctx: &Context,
    policy: &ClusterPolicy,
    reconciler: &str,
    desired: &Desired,
) -> Result<(), Error> {
    let live = policy
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    let condition = conditions::merge(live, desired, policy.metadata.generation, Timestamp::now());
    let patch = json!({
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "status": { "conditions": [condition] },
    });
    tracing::debug!(
        condition = %desired.type_,
        status = desired.status,
        reason = %desired.reason,
        message = %desired.message,
        "writing condition"
    );
    let api: Api<ClusterPolicy> = Api::all(ctx.client.clone());
    let params = PatchParams::apply(&format!("{FIELD_MANAGER_PREFIX}{reconciler}")).force();
    api.patch_status(&policy.name_any(), &params, &Patch::Apply(&patch))
        .await
        .map_err(Error::kube(format!("writing condition {}", desired.type_)))?;
    Ok(())
}
