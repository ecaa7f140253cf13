//! Writing one reconciler's condition into `ClusterPolicy.status.conditions` with server-side
//! apply: the list is a map keyed by `type`, so each reconciler owns its own entry. Nothing is sent
//! when the live condition already says the same.

use gpu_operator_api::ClusterPolicy;
use k8s_openapi::jiff::Timestamp;
use kube::{
    Api, ResourceExt as _,
    api::{Patch, PatchParams},
};
use serde_json::json;

pub use crate::conditions::Desired;
use crate::{Context, Error, apply::FIELD_MANAGER_PREFIX, conditions};

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
    let generation = policy.metadata.generation;
    if conditions::is_current(live, desired, generation) {
        return Ok(false);
    }
    let condition = conditions::merge(live, desired, generation, Timestamp::now());
    let patch = json!({
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "status": { "conditions": [condition] },
    });
    let api: Api<ClusterPolicy> = Api::all(ctx.client.clone());
    let params = PatchParams::apply(&format!("{FIELD_MANAGER_PREFIX}{reconciler}")).force();
    api.patch_status(&policy.name_any(), &params, &Patch::Apply(&patch))
        .await
        .map_err(Error::kube(format!("writing condition {}", desired.type_)))?;
    Ok(true)
}
