//! Zero writes once converged, for every example ClusterPolicy in `manifests/examples` (together
//! they enable every operand and every optional feature: the device plugin's config manager with
//! time-slicing, the MIG manager with a user's layouts, DCGM, the DCGM exporter's ServiceMonitor,
//! the node status exporter, CDI, GDS), counted in the API server's audit log while labels of GPU
//! nodes that no operand reads keep changing — the changes real fleets see all the time (NFD,
//! GFD, autoscalers), each of which wakes every operand's reconciler.
//!
//! An absence check that ends on markers, with a positive control: every label change waits
//! until every reconciler that node labels wake has finished a reconcile after it (their
//! reconcile counters on `/metrics`), so the window ends when the last change has been handled,
//! not after a sleep; then a hand edit of one object the operator owns must show up as exactly
//! its revert and one `Applied` Event, which proves the audit-log reader sees the operator's
//! writes (a user-name or audit-policy mismatch would make "no writes" pass vacuously).
#![cfg(feature = "e2e")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::large_futures
)]

use gpu_operator_e2e::quiet;
mod steps;
use gpu_operator_e2e::scenario as support;

use std::time::Duration;

use gpu_operator_core::fixtures;
use gpu_operator_harness::{
    access::kubectl_ok,
    crd::{SERVICE_MONITOR_CRD_YAML, ServiceMonitorCrdCleanup, repo_root},
    unique_name,
};
use k8s_openapi::{api::core::v1::ConfigMap, jiff::Timestamp};
use kube::api::PostParams;

use support::{Cleanup, IMAGES, gpu_nodes, setup, simulated_nodes};

/// The example with the config manager and the MIG manager's config: the case of the empty-env
/// bug (every node label change re-applied three DaemonSets), watched for a full minute.
const LONG_CASE: &str = "all-features";
const LONG_WINDOW: Duration = Duration::from_secs(60);
/// The window of the other examples.
const WINDOW: Duration = Duration::from_secs(15);

#[tokio::test]
async fn every_example_policy_once_converged_writes_nothing_while_unrelated_node_labels_change() {
    let env = setup().await;
    let root = repo_root();
    let mut examples = fixtures::examples(&root).unwrap();
    // The bug's case first: a failure there is the one this test was written for.
    examples.sort_by_key(|(stem, _)| stem != LONG_CASE);
    assert!(
        examples.iter().any(|(stem, _)| stem == LONG_CASE),
        "manifests/examples/{LONG_CASE}.yaml is missing"
    );
    let config_maps: kube::Api<ConfigMap> =
        kube::Api::namespaced(env.client.clone(), &env.namespace);
    for mut config_map in fixtures::example_config_maps(&root).unwrap() {
        config_map.metadata.namespace = Some(env.namespace.clone());
        config_maps
            .create(&PostParams::default(), &config_map)
            .await
            .unwrap();
    }
    let crd = env.dir.join("servicemonitor-crd.yaml");
    std::fs::write(&crd, SERVICE_MONITOR_CRD_YAML).unwrap();
    kubectl_ok(&["apply", "-f", crd.to_str().unwrap()]).unwrap();
    let _crd = ServiceMonitorCrdCleanup;
    let name = unique_name("cluster-policy");
    let _cleanup = Cleanup {
        namespace: env.namespace.clone(),
        policies: vec![name.clone()],
    };
    let operator = env.start(&IMAGES);
    let gpus = gpu_nodes(&simulated_nodes(&env.client).await);
    assert!(!gpus.is_empty(), "the fleet has no GPU node");

    for (index, (stem, spec)) in examples.iter().enumerate() {
        steps::converge(&env, &name, spec, &operator, stem).await;
        let window = if stem == LONG_CASE {
            LONG_WINDOW
        } else {
            WINDOW
        };
        let from = Timestamp::now();
        let flips = quiet::change_unrelated_labels(&env, &operator, &gpus, window).await;
        let writes = quiet::operator_writes(&env, from);
        assert!(
            writes.is_empty(),
            "{stem}: converged, {flips} changes of a label no operand reads made the operator \
             write {writes:#?}\n{}",
            operator.log_tail()
        );
        quiet::a_hand_edit_is_exactly_one_revert_and_one_event(
            &env, &name, &operator, stem, index, from,
        )
        .await;
        if stem == LONG_CASE {
            steps::node_status_exporter_runs_on_every_gpu_node(&env, &gpus).await;
        }
    }
    operator.stop().unwrap();
}
