//! The GPUCluster's ordered teardown, behind NVIDIA's finalizer
//! `gpucluster.nvidia.com/dra-resourceclaim` ([`FINALIZER`]). Deleting the GPUCluster at once
//! would let the owner-reference garbage collector remove the DRA kubelet plugin while pods still
//! hold devices it prepared: their claims could then never be unprepared. So, while the
//! GPUCluster is active, [`ensure_finalizer`] puts the finalizer on it (one patch, only when
//! missing); once it is being deleted, [`reconcile`]:
//!
//! 1. deletes the DRA validator DaemonSet (foreground, so it is gone only once its pods are) and
//!    waits for it: its own claims are released with its pods;
//! 2. lists the ResourceClaims of every namespace (not cached: they are read only here, so the
//!    operator holds no cluster-wide claim cache for a teardown; it polls every
//!    [`CLAIMS_POLL`]) and, while some hold devices of our drivers ([`claims::held`]), keeps the
//!    finalizer and says so in `Ready` (reason `WaitingForClaims`, naming the claims, their pods
//!    and the fix) and in an Event;
//! 3. deletes the DRA kubelet plugin DaemonSet (foreground) and waits until it and its pods are
//!    gone;
//! 4. removes the finalizer with a JSON patch that tests the finalizer list first, so another
//!    controller's finalizer, added meanwhile, is never dropped. The garbage collector then
//!    removes the rest of what the GPUCluster owns.

pub mod claims;

use std::time::Duration;

use gpu_operator_api::{
    GpuCluster,
    conditions::{self as names},
    gpu_cluster::{FINALIZER, GpuClusterState},
};
use gpu_operator_core::{Context, Error, pipeline::events, report::conditions::Desired};
use json_patch::{
    AddOperation, PatchOperation, ReplaceOperation, TestOperation, jsonptr::PointerBuf,
};
use k8s_openapi::api::{apps::v1::DaemonSet, resource::v1::ResourceClaim};
use kube::{
    Api, Resource as _, ResourceExt as _,
    api::{DeleteParams, ListParams, Patch, PatchParams},
    runtime::{controller::Action, events::EventType, reflector::ObjectRef},
};
use serde_json::{Map, json};

use crate::overall::{self, Overall};

pub use claims::CLAIMING_DAEMONSETS;

/// The DRA kubelet plugin's DaemonSet (the DRA driver operand's), removed last.
pub const KUBELET_PLUGIN_DAEMONSET: &str = "nvidia-dra-driver-kubelet-plugin";
/// How often the claims are read again while some hold our devices.
pub const CLAIMS_POLL: Duration = Duration::from_secs(15);
/// How often a DaemonSet being removed is looked at again.
const REMOVAL_POLL: Duration = Duration::from_secs(5);

/// Reason of `Ready` while claims on our devices hold the teardown.
pub const WAITING_FOR_CLAIMS_REASON: &str = "WaitingForClaims";
/// Reason of `Ready` while the DRA validator or the kubelet plugin is being removed.
pub const TEARING_DOWN_REASON: &str = "TearingDown";

/// Whether `cr` carries our finalizer.
pub fn has_finalizer(cr: &GpuCluster) -> bool {
    cr.finalizers().iter().any(|f| f == FINALIZER)
}

/// The JSON patch adding [`FINALIZER`] to `cr`, testing what it holds now (the finalizer list,
/// or the resource version when it has none); `None` when it is there.
pub fn add_finalizer_patch(cr: &GpuCluster) -> Option<json_patch::Patch> {
    if has_finalizer(cr) {
        return None;
    }
    let finalizers = PointerBuf::from_tokens(["metadata", "finalizers"]);
    let (test, add) = match cr.metadata.finalizers.as_deref() {
        Some(live) => (
            TestOperation {
                path: finalizers.clone(),
                value: json!(live),
            },
            AddOperation {
                path: PointerBuf::from_tokens(["metadata", "finalizers", "-"]),
                value: json!(FINALIZER),
            },
        ),
        None => (
            TestOperation {
                path: PointerBuf::from_tokens(["metadata", "resourceVersion"]),
                value: json!(cr.metadata.resource_version),
            },
            AddOperation {
                path: finalizers,
                value: json!([FINALIZER]),
            },
        ),
    };
    Some(json_patch::Patch(vec![
        PatchOperation::Test(test),
        PatchOperation::Add(add),
    ]))
}

/// The JSON patch removing [`FINALIZER`] from `cr`, testing the finalizer list first and keeping
/// every other finalizer; `None` when it is not there.
pub fn remove_finalizer_patch(cr: &GpuCluster) -> Option<json_patch::Patch> {
    if !has_finalizer(cr) {
        return None;
    }
    let live = cr.finalizers();
    let kept: Vec<&String> = live.iter().filter(|f| *f != FINALIZER).collect();
    let path = PointerBuf::from_tokens(["metadata", "finalizers"]);
    Some(json_patch::Patch(vec![
        PatchOperation::Test(TestOperation {
            path: path.clone(),
            value: json!(live),
        }),
        PatchOperation::Replace(ReplaceOperation {
            path,
            value: json!(kept),
        }),
    ]))
}

/// Puts [`FINALIZER`] on the active `cr` when it is missing (no request when it is there).
pub async fn ensure_finalizer(ctx: &Context, cr: &GpuCluster) -> Result<(), Error> {
    let Some(patch) = add_finalizer_patch(cr) else {
        return Ok(());
    };
    patch_finalizers(ctx, cr, patch, "adding").await
}

async fn patch_finalizers(
    ctx: &Context,
    cr: &GpuCluster,
    patch: json_patch::Patch,
    verb: &str,
) -> Result<(), Error> {
    let api: Api<GpuCluster> = Api::all(ctx.client.clone());
    let action = format!(
        "{verb} finalizer {FINALIZER} on GPUCluster {}",
        cr.name_any()
    );
    api.patch_metadata(
        &cr.name_any(),
        &PatchParams::default(),
        &Patch::<()>::Json(patch),
    )
    .await
    .map_err(Error::kube(action))
    .map(drop)
}

/// What `Ready` says during the teardown: not ready, for `reason`.
pub fn teardown_overall(reason: &str, message: String) -> Overall {
    let ready = Desired::not_ok(names::READY, reason, message);
    Overall {
        state: GpuClusterState::NotReady.as_str(),
        error: overall::error_condition(&ready),
        ready,
        catching_up: false,
    }
}

/// Tears the GPUCluster `cr` down in order (see the module header): one step per call, then a
/// requeue to look again.
pub async fn reconcile(ctx: &Context, cr: &GpuCluster) -> Result<Action, Error> {
    if !has_finalizer(cr) {
        return Ok(Action::await_change());
    }
    let mut removing = Vec::new();
    for daemonset in CLAIMING_DAEMONSETS {
        if remove_daemonset(ctx, daemonset).await? {
            removing.push(daemonset);
        }
    }
    if !removing.is_empty() {
        let message = format!(
            "GPUCluster is being deleted: removing its DaemonSets whose pods hold claims of their \
             own ({})",
            removing.join(", ")
        );
        say(ctx, cr, TEARING_DOWN_REASON, message, false).await;
        return Ok(Action::requeue(REMOVAL_POLL));
    }
    let listed: Vec<ResourceClaim> = gpu_operator_core::dra_api::list_all(
        &ctx.client,
        ctx.server.dra_api_in_use(),
        &ListParams::default(),
    )
    .await?;
    let held = claims::held(&listed, &ctx.namespace);
    if !held.is_empty() {
        say(
            ctx,
            cr,
            WAITING_FOR_CLAIMS_REASON,
            claims::waiting_message(&held),
            true,
        )
        .await;
        return Ok(Action::requeue(CLAIMS_POLL));
    }
    if remove_daemonset(ctx, KUBELET_PLUGIN_DAEMONSET).await? {
        let message = format!(
            "GPUCluster is being deleted: no ResourceClaim holds NVIDIA DRA devices any more; \
             removing the DRA kubelet plugin (DaemonSet {KUBELET_PLUGIN_DAEMONSET})"
        );
        say(ctx, cr, TEARING_DOWN_REASON, message, false).await;
        return Ok(Action::requeue(REMOVAL_POLL));
    }
    if let Some(patch) = remove_finalizer_patch(cr) {
        patch_finalizers(ctx, cr, patch, "removing").await?;
        tracing::info!(name = %cr.name_any(), "GPUCluster released: the garbage collector removes the rest");
    }
    Ok(Action::await_change())
}

/// Deletes our DaemonSet `name` in the operator namespace (foreground: it stays until its pods
/// are gone) unless it is being deleted already; whether it is still there (by the cache).
async fn remove_daemonset(ctx: &Context, name: &str) -> Result<bool, Error> {
    let key = ObjectRef::<DaemonSet>::new(name).within(&ctx.namespace);
    let Some(live) = ctx.stores.daemonsets.get(&key) else {
        return Ok(false);
    };
    if live.meta().deletion_timestamp.is_none() {
        let api: Api<DaemonSet> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
        match api.delete(name, &DeleteParams::foreground()).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.is_not_found() => {}
            Err(error) => {
                return Err(Error::kube(format!(
                    "deleting DaemonSet {}/{name} for the GPUCluster's teardown",
                    ctx.namespace
                ))(error));
            }
        }
    }
    Ok(true)
}

/// Writes `Ready` for the teardown step (through [`overall::write`]) and, when it says something
/// new and `warn` holds, a Warning Event with the same message.
async fn say(ctx: &Context, cr: &GpuCluster, reason: &str, message: String, warn: bool) {
    let live = cr
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .and_then(|c| c.iter().find(|c| c.type_ == names::READY));
    let new = live.is_none_or(|c| c.reason != reason || c.message != message);
    let wanted = teardown_overall(reason, message);
    let live_namespace = cr.status.as_ref().and_then(|s| s.namespace.as_deref());
    let mut fields = Map::new();
    fields.insert("namespace".to_owned(), json!(ctx.namespace));
    overall::write(
        ctx,
        cr,
        &wanted,
        fields,
        live_namespace == Some(ctx.namespace.as_str()),
    );
    if new && warn {
        events::publish(
            &ctx.recorder,
            &cr.object_ref(&()),
            EventType::Warning,
            reason,
            &wanted.ready.message,
        )
        .await;
    }
}

#[cfg(test)]
mod tests {
    use gpu_operator_api::GpuClusterSpec;

    use super::*;

    fn cluster(finalizers: Option<&[&str]>) -> GpuCluster {
        let mut cr = GpuCluster::new("gpu-cluster", GpuClusterSpec::default());
        cr.metadata.resource_version = Some("42".to_owned());
        cr.metadata.finalizers = finalizers.map(|f| f.iter().map(|s| (*s).to_owned()).collect());
        cr
    }

    fn applied(cr: &GpuCluster, patch: &json_patch::Patch) -> Result<Vec<String>, String> {
        let mut value = serde_json::to_value(cr).unwrap();
        json_patch::patch(&mut value, patch).map_err(|e| e.to_string())?;
        Ok(serde_json::from_value::<GpuCluster>(value)
            .unwrap()
            .finalizers()
            .to_vec())
    }

    #[test]
    fn the_finalizer_is_added_once_beside_others() {
        let bare = cluster(None);
        let patch = add_finalizer_patch(&bare).unwrap();
        assert_eq!(applied(&bare, &patch).unwrap(), [FINALIZER]);
        let other = cluster(Some(&["example.com/keep"]));
        let patch = add_finalizer_patch(&other).unwrap();
        assert_eq!(
            applied(&other, &patch).unwrap(),
            ["example.com/keep", FINALIZER]
        );
        assert_eq!(
            add_finalizer_patch(&cluster(Some(&[FINALIZER]))),
            None,
            "no write once there"
        );
    }

    #[test]
    fn the_finalizer_is_removed_keeping_others_and_only_from_what_was_read() {
        let cr = cluster(Some(&["example.com/keep", FINALIZER]));
        let patch = remove_finalizer_patch(&cr).unwrap();
        assert_eq!(applied(&cr, &patch).unwrap(), ["example.com/keep"]);
        // Another finalizer added since the read: the test fails and nothing is dropped.
        let moved = cluster(Some(&["example.com/keep", FINALIZER, "example.com/late"]));
        assert!(applied(&moved, &patch).is_err());
        assert_eq!(remove_finalizer_patch(&cluster(None)), None);
    }

    #[test]
    fn the_teardown_is_not_ready_with_nvidias_pair() {
        let said = teardown_overall(WAITING_FOR_CLAIMS_REASON, "ml/c0".to_owned());
        assert_eq!(said.state, "notReady");
        assert_eq!(
            (said.ready.status, said.ready.reason.as_str()),
            (false, WAITING_FOR_CLAIMS_REASON)
        );
        assert_eq!(
            (said.error.status, said.error.reason.as_str()),
            (true, WAITING_FOR_CLAIMS_REASON)
        );
    }
}
