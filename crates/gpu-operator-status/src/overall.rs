//! Writing an owner's overall status, for every [`Owner`] kind alike: NVIDIA's `state` and the
//! paired `Ready`/`Error` conditions (plus the kind's further fields, such as `namespace`),
//! written only when they moved what a user reads, through the write gate, with server-side apply
//! on the status subresource. What the status says is each kind's own summary
//! ([`crate::policy_status::summarize`], [`crate::nvidia_driver_status::summarize`]).

use std::time::{Duration, Instant};

use gpu_operator_api::conditions::{self as names, reason};
use gpu_operator_core::{
    Context, Error,
    contract::Owner,
    pipeline::{
        apply::FIELD_MANAGER_PREFIX,
        status_write,
        write_gate::{Decision, Move},
    },
    report::conditions::{self, Desired},
};
use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Condition, jiff::Timestamp};
use kube::{
    Api, ResourceExt as _,
    api::{Patch, PatchParams},
};
use serde_json::{Map, Value, json};

/// Field manager suffix of the overall status writes (shared by every kind: one status
/// reconciler per object).
pub const FIELD_MANAGER: &str = "status";

/// What an owner's overall status should say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Overall {
    /// `status.state`, as written (`ready`, `notReady`, ...).
    pub state: &'static str,
    /// The `Ready` condition, as written.
    pub ready: Desired,
    /// The `Error` condition, as written (the opposite of `Ready`: see [`error_condition`]).
    pub error: Desired,
    /// Not ready only because the operands have not acknowledged the current generation yet (a
    /// spec change they are reconciling this very moment): a ready status waits a moment before
    /// turning `notReady`, which would flap.
    pub catching_up: bool,
}

/// The value of `status.state` of an owner that is ready.
const READY_STATE: &str = "ready";

/// NVIDIA's `Error` condition, the opposite of `Ready`.
pub fn error_condition(ready: &Desired) -> Desired {
    if ready.status {
        Desired::not_ok(names::ERROR, reason::READY, String::new())
    } else {
        Desired::ok(names::ERROR, &ready.reason, ready.message.clone())
    }
}

/// The ClusterPolicy's `Ready`: `False` keeps NVIDIA's reason `Error` when the cause is a failure.
pub fn ready_condition(ready: &Desired) -> Desired {
    let mut ready = ready.clone();
    if !ready.status && ready.reason == reason::RECONCILE_FAILED {
        reason::ERROR.clone_into(&mut ready.reason);
    }
    ready
}

/// Writes `overall` to `owner` when it moved what a user reads (see
/// [`gpu_operator_core::pipeline::write_gate`]): no status yet and becoming ready are written at
/// once; a change of the message alone waits until it held still, and so does `ready` turning
/// `notReady` only because the operands are catching up. `fields` are the kind's further status
/// fields, and `fields_current` whether the live status already has them. Returns how long a
/// waiting change waits.
pub async fn write<K: Owner>(
    ctx: &Context,
    owner: &K,
    overall: &Overall,
    fields: Map<String, Value>,
    fields_current: bool,
) -> Result<Option<Duration>, Error> {
    let live: Vec<Condition> = owner.conditions().unwrap_or_default().to_vec();
    let live_state = owner.state();
    let generation = owner.meta().generation;
    let wanted = [overall.ready.clone(), overall.error.clone()];
    let key = status_write::gate_key(owner, names::READY);
    let current = live_state == Some(overall.state)
        && fields_current
        && wanted
            .iter()
            .all(|d| conditions::is_current(&live, d, generation));
    if current {
        ctx.status_gate.written(&key, None);
        return Ok(None);
    }
    let catching_up = overall.catching_up && live_state == Some(READY_STATE);
    let moved = if live_state.is_none()
        || (overall.state == READY_STATE && live_state != Some(READY_STATE))
    {
        Move::Ready
    } else if !fields_current
        || (!catching_up
            && (live_state != Some(overall.state)
                || wanted
                    .iter()
                    .any(|d| conditions::moved(&live, d, generation))))
    {
        Move::Other
    } else {
        Move::None
    };
    let detail = format!("{} {}", overall.state, overall.ready.message);
    if let Decision::Wait(after) =
        ctx.status_gate
            .decide(&key, moved, None, &detail, Instant::now())
    {
        return Ok(Some(after));
    }
    let kind = K::kind(&());
    tracing::debug!(%kind, state = overall.state, message = %overall.ready.message, "writing the status");
    let now = Timestamp::now();
    let merged: Vec<Condition> = wanted
        .iter()
        .map(|d| conditions::merge(&live, d, generation, now))
        .collect();
    let mut status = fields;
    status.insert("state".to_owned(), json!(overall.state));
    status.insert("conditions".to_owned(), json!(merged));
    let patch = json!({
        "apiVersion": K::api_version(&()),
        "kind": kind,
        "status": status,
    });
    let api: Api<K> = Api::all(ctx.client.clone());
    let params = PatchParams::apply(&format!("{FIELD_MANAGER_PREFIX}{FIELD_MANAGER}")).force();
    api.patch_status(&owner.name_any(), &params, &Patch::Apply(&patch))
        .await
        .map_err(Error::kube(format!("writing the {kind} status")))?;
    ctx.status_gate.written(&key, None);
    Ok(None)
}
