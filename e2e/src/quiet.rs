//! Quiet windows that end on markers, and the positive control that proves the audit-log reader
//! sees the operator's writes: shared by the operator scenario and the converged-writes scenario.
//!
//! A label change on a node wakes every reconciler except the validators' summary; each change
//! here waits until every such reconciler has finished a reconcile after it (their counters on
//! the operator's `/metrics`), so "nothing was written" is read after the operator has handled
//! the last change, not after a sleep.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::missing_panics_doc,
    reason = "test support: a step that cannot be taken fails the test that takes it"
)]

use std::{collections::BTreeMap, time::Duration};

use gpu_operator_core::report::exposition;
use gpu_operator_harness::{
    operator::{Operator, Write, writes_by},
    wait_until,
};
use k8s_openapi::{
    api::core::v1::{ConfigMap, Event, Node},
    jiff::Timestamp,
};
use kube::{
    Api, ResourceExt as _,
    api::{ListParams, Patch, PatchParams},
};
use serde_json::json;

use crate::scenario::{Env, TIMEOUT, get};

/// A label no operand reads (not NVIDIA's, not NFD's): what an autoscaler or a team's own tooling
/// changes on nodes.
const UNRELATED: &str = "e2e.gpu-operator/unrelated";
/// At least this many label changes per window, whatever its length.
const MIN_CHANGES: usize = 5;
/// The reconcilers that unrelated node label changes do not wake: the validators' summary (it
/// follows their reports) and the driver upgrade (it follows the upgrade labels, annotations,
/// cordon and readiness), the NVIDIADrivers' overall status (it follows their driver
/// condition) and the GPUCluster's (it follows its operands' conditions). Their writes are
/// counted all the same.
const NOT_WOKEN_BY_LABELS: [&str; 4] = [
    "node-validation",
    "driver-upgrade",
    "nvidia-driver-status",
    "gpu-cluster-status",
];
/// Our objects' labels (`app.kubernetes.io/…`, as NVIDIA's operator sets them).
const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "gpu-operator");
const COMPONENT: &str = "app.kubernetes.io/component";

/// Changes [`UNRELATED`] on the GPU nodes in turn, at least [`MIN_CHANGES`] times and until
/// `window` has passed. Each change ends on a marker: every reconciler that node labels wake has
/// finished a reconcile after it. Returns the number of changes.
pub async fn change_unrelated_labels(
    env: &Env,
    operator: &Operator,
    gpus: &[String],
    window: Duration,
) -> usize {
    let nodes: Api<Node> = Api::all(env.client.clone());
    let started = tokio::time::Instant::now();
    let mut changes = 0;
    while changes < MIN_CHANGES || started.elapsed() < window {
        let node = &gpus[changes % gpus.len()];
        let before = reconciles(operator).await;
        // Unique per run: a value an earlier run on the same cluster left is no change (no event).
        let value = format!("{}-{changes}", std::process::id());
        let label = json!({"metadata": {"labels": {UNRELATED: value}}});
        nodes
            .patch(node, &PatchParams::default(), &Patch::Merge(&label))
            .await
            .unwrap();
        let woken: Vec<String> = before
            .keys()
            .filter(|r| !NOT_WOKEN_BY_LABELS.contains(&r.as_str()))
            .cloned()
            .collect();
        assert!(
            woken.len() > 2,
            "the operator's /metrics lists too few reconcilers: {before:?}"
        );
        wait_reconciled_after(operator, &before, &woken, "the label change").await;
        changes += 1;
    }
    changes
}

/// Waits until each reconciler of `names` has finished more reconciles than `before` counted
/// (none counted: at least one), that is, one after `what`.
pub async fn wait_reconciled_after(
    operator: &Operator,
    before: &BTreeMap<String, f64>,
    names: &[String],
    what: &str,
) {
    let waited = wait_until(
        &format!("every reconciler to finish a reconcile after {what}"),
        TIMEOUT,
        || async {
            let now = reconciles(operator).await;
            let done = names.iter().all(|r| {
                now.get(r).copied().unwrap_or_default() > before.get(r).copied().unwrap_or_default()
            });
            Ok(done.then_some(()))
        },
    )
    .await;
    if let Err(error) = waited {
        let now = reconciles(operator).await;
        let behind: Vec<&String> = names
            .iter()
            .filter(|r| {
                now.get(*r).copied().unwrap_or_default()
                    <= before.get(*r).copied().unwrap_or_default()
            })
            .collect();
        panic!("{error}: behind: {behind:?}\n{}", operator.log_tail());
    }
}

/// Reconciles finished so far, by reconciler (failed ones included), from the operator's
/// `gpu_operator_reconcile_duration_seconds_count`.
pub async fn reconciles(operator: &Operator) -> BTreeMap<String, f64> {
    let url = format!("http://127.0.0.1:{}/metrics", operator.metrics_port);
    let text = get(&url).await.expect("the operator's /metrics answers");
    let mut counts = BTreeMap::new();
    for sample in exposition::samples(&text).unwrap() {
        if sample.name == "gpu_operator_reconcile_duration_seconds_count" {
            *counts
                .entry(sample.labels.get("reconciler").cloned().unwrap_or_default())
                .or_default() += sample.value;
        }
    }
    counts
}

/// The operator's mutating requests after `from`, lease renewals aside.
pub fn operator_writes(env: &Env, from: Timestamp) -> Vec<Write> {
    writes_by(&env.user, from)
        .unwrap()
        .into_iter()
        .filter(|w| w.resource != "leases")
        .collect()
}

/// The positive control: a hand edit of one ConfigMap the operator owns (the `index`-th, so the
/// examples exercise different reconcilers) is reverted, and the operator's writes since `from`
/// are exactly that revert and one `Applied` Event saying it wrote one object.
pub async fn a_hand_edit_is_exactly_one_revert_and_one_event(
    env: &Env,
    name: &str,
    operator: &Operator,
    stem: &str,
    index: usize,
    from: Timestamp,
) {
    let config_maps: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.namespace);
    let selector = format!("{}={}", MANAGED_BY.0, MANAGED_BY.1);
    let mut owned: Vec<ConfigMap> = config_maps
        .list(&ListParams::default().labels(&selector))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|c| c.data.as_ref().is_some_and(|d| !d.is_empty()))
        .collect();
    owned.sort_by_key(kube::ResourceExt::name_any);
    assert!(
        !owned.is_empty(),
        "{stem}: the operator owns no ConfigMap with data"
    );
    let target = &owned[index % owned.len()];
    let target_name = target.name_any();
    let reconciler = target.labels()[COMPONENT].clone();
    let original = target.data.clone().unwrap();
    let edited: BTreeMap<&String, String> = original
        .iter()
        .map(|(k, v)| (k, format!("{v}\n# edited by hand")))
        .collect();
    let before = reconciles(operator).await;
    config_maps
        .patch(
            &target_name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"data": edited})),
        )
        .await
        .unwrap();
    let is_revert =
        |w: &Write| w.verb == "patch" && w.resource == "configmaps" && w.name == target_name;
    let is_event = |w: &Write| w.resource == "events" && (w.verb == "create" || w.verb == "patch");
    wait_until(
        &format!("{stem}: the operator to revert ConfigMap {target_name}, report it and finish"),
        TIMEOUT,
        || async {
            let writes = operator_writes(env, from);
            let finished = reconciles(operator)
                .await
                .get(&reconciler)
                .copied()
                .unwrap_or_default()
                > before.get(&reconciler).copied().unwrap_or_default();
            Ok(
                (finished && writes.iter().any(is_revert) && writes.iter().any(is_event))
                    .then_some(()),
            )
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", operator.log_tail()));
    let writes = operator_writes(env, from);
    assert!(
        writes.len() == 2 && is_revert(&writes[0]) && is_event(&writes[1]),
        "{stem}: the hand edit of {target_name} must show up as exactly its revert and one Event, \
         the operator wrote {writes:#?}"
    );
    let live = config_maps.get(&target_name).await.unwrap();
    assert_eq!(live.data.as_ref(), Some(&original), "{stem}: reverted");
    let events: Api<Event> = Api::all(env.client.clone());
    let applied = events
        .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("Applied"))
        .max_by_key(|e| {
            e.metadata
                .resource_version
                .as_deref()
                .and_then(|v| v.parse::<u64>().ok())
        })
        .expect("an Applied Event");
    assert!(
        applied
            .message
            .as_deref()
            .unwrap_or_default()
            .ends_with(": wrote 1 object(s)"),
        "{stem}: {applied:?}"
    );
}
