//! Each NVIDIADriver's overall status as `kubectl get nvidiadrivers` shows it: `state`, NVIDIA's
//! `Ready`/`Error` pair with the ready/desired nodes and the nodes that are not ready (or that
//! another NVIDIADriver selects too) named, `namespace` and `observedGeneration`; and nothing
//! written once converged.

use gpu_operator_api::{NvidiaDriver, conditions::reason};
use gpu_operator_e2e::quiet;
use gpu_operator_harness::{access::kubectl_ok, operator::Operator, wait_until};
use k8s_openapi::jiff::Timestamp;
use kube::{
    Api,
    api::{Patch, PatchParams},
};
use serde_json::json;

use crate::support::{Env, TIMEOUT};

/// The NVIDIADrivers' overall status reconciler (its metric label).
const STATUS: &str = "nvidia-driver-status";
/// An annotation nothing reads.
const UNRELATED: &str = "e2e.gpu-operator/unrelated";
/// How many changes of it the quiet window sees.
const CHANGES: usize = 3;

/// What an NVIDIADriver's overall status said when it matched.
pub struct Overall {
    pub state: String,
    pub error_reason: String,
    pub message: String,
}

/// Reads `cr`'s overall status.
async fn overall(drivers: &Api<NvidiaDriver>, cr: &str) -> Option<(Overall, NvidiaDriver)> {
    let live = drivers.get(cr).await.ok()?;
    let status = live.status.clone()?;
    let conditions = status.conditions.clone().unwrap_or_default();
    let ready = conditions.iter().find(|c| c.type_ == "Ready")?;
    let error = conditions.iter().find(|c| c.type_ == "Error")?;
    assert_ne!(ready.status, error.status, "Ready and Error are opposites");
    Some((
        Overall {
            state: status.state.as_str().to_owned(),
            error_reason: error.reason.clone(),
            message: ready.message.clone(),
        },
        live,
    ))
}

/// Waits until `cr`'s overall status is `state` with the `Error` reason `error_reason` (NVIDIA's)
/// and a message containing every one of `named`; checks `namespace` and `observedGeneration`.
pub async fn wait_overall(
    env: &Env,
    cr: &str,
    state: &str,
    error_reason: &str,
    named: &[&str],
) -> Overall {
    let drivers: Api<NvidiaDriver> = Api::all(env.client.clone());
    let last = std::sync::Mutex::new(String::new());
    let found = wait_until(
        &format!("NVIDIADriver {cr} to be {state} ({error_reason}) naming {named:?}"),
        TIMEOUT,
        || {
            let drivers = drivers.clone();
            let last = &last;
            async move {
                let Some((now, live)) = overall(&drivers, cr).await else {
                    return Ok(None);
                };
                *last.lock().unwrap() =
                    format!("{} {} {}", now.state, now.error_reason, now.message);
                let matched = now.state == state
                    && now.error_reason == error_reason
                    && named.iter().all(|n| now.message.contains(n));
                if !matched {
                    return Ok(None);
                }
                let status = live.status.unwrap();
                assert_eq!(status.namespace.as_deref(), Some(env.namespace.as_str()));
                if state == "ready" {
                    assert_eq!(status.observed_generation, live.metadata.generation);
                }
                Ok(Some(now))
            }
        },
    )
    .await;
    found.unwrap_or_else(|e| panic!("{e}; last seen: {}", last.lock().unwrap()))
}

/// `a`'s pod runs (it was notReady while it waited, see `handover`): `ready` with its count;
/// `b`'s still waits for the ClusterPolicy's old pod on `node_b`: `notReady` naming the node.
/// Then the columns, and no write once converged.
pub async fn a_ready_pool_and_a_waiting_one(
    env: &Env,
    operator: &Operator,
    a: &str,
    (b, node_b): (&str, &str),
) {
    wait_overall(env, a, "ready", reason::READY, &["ready on 1/1 GPU nodes"]).await;
    wait_overall(
        env,
        b,
        "notReady",
        reason::DRIVER_NOT_READY,
        &["ready on 0/1 GPU nodes", node_b],
    )
    .await;
    kubectl_shows(a, "ready");
    converged_sends_no_writes(env, operator, a).await;
}

/// `kubectl get nvidiadrivers` shows NVIDIA's columns (the state) and, wide, the message.
fn kubectl_shows(cr: &str, state: &str) {
    let plain = kubectl_ok(&["get", "nvidiadrivers", cr]).unwrap();
    assert!(
        plain.contains("STATUS") && plain.contains("DEFAULT") && plain.contains(state),
        "{plain}"
    );
    let wide = kubectl_ok(&["get", "nvidiadrivers", cr, "-o", "wide"]).unwrap();
    assert!(
        wide.contains("MESSAGE") && wide.contains("GPU nodes"),
        "{wide}"
    );
}

/// Converged: changes of an annotation on `cr` that nothing reads wake its status reconciler
/// (and its driver's), each change ending once that reconciler finished a reconcile after it, and
/// send no write; the positive control: a hand edit of `cr`'s state is put back, with one write.
async fn converged_sends_no_writes(env: &Env, operator: &Operator, cr: &str) {
    let drivers: Api<NvidiaDriver> = Api::all(env.client.clone());
    let from = Timestamp::now();
    for change in 0..CHANGES {
        let before = quiet::reconciles(operator).await;
        let note = json!({"metadata": {"annotations": {UNRELATED: change.to_string()}}});
        drivers
            .patch(cr, &PatchParams::default(), &Patch::Merge(&note))
            .await
            .unwrap();
        quiet::wait_reconciled_after(operator, &before, &[STATUS.to_owned()], "the annotation")
            .await;
    }
    let writes = quiet::operator_writes(env, from);
    assert!(
        writes.is_empty(),
        "a converged NVIDIADriver must see no write, saw {writes:?} during {CHANGES} changes"
    );
    let edit = json!({"status": {"state": "notReady"}});
    drivers
        .patch_status(cr, &PatchParams::default(), &Patch::Merge(&edit))
        .await
        .unwrap();
    wait_overall(env, cr, "ready", reason::READY, &["GPU nodes"]).await;
    let writes: Vec<_> = quiet::operator_writes(env, from)
        .into_iter()
        .filter(|w| w.resource.starts_with("nvidiadrivers"))
        .collect();
    assert_eq!(writes.len(), 1, "one write puts the state back: {writes:?}");
}
