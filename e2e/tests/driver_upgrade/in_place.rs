//! The in-place restart of driver pods whose template changed but whose driver did not.

use gpu_operator_harness::{access::kubectl_ok, operator::Operator, wait_until};
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, ResourceExt as _,
    api::{ListParams, Patch, PatchParams},
};
use serde_json::json;

use super::{
    DRIVER_APP, LONG, nodes, state,
    support::{Env, pods_of},
    upgrade_message,
    world::record,
};

/// NVIDIA's `test_custom_labels_override`: `daemonsets.labels` reach every driver pod. Only the
/// template changed (the driver installed is the same), so each driver pod of ours is restarted in
/// place within the policy's limits: no node cordoned, no GPU pod evicted, the skipped node left
/// alone, one `DriverRestartInPlace` Event per node. The positive control is the label itself:
/// it can only reach a running pod through a restart.
pub async fn template_changes_restart_driver_pods_in_place(
    env: &Env,
    name: &str,
    (others, skipped, cordoned): (&[String], &str, &str),
    workloads: &str,
    operator: &Operator,
) {
    const LABEL: &str = "e2e-template";
    let gpu_pods = || async {
        let api: Api<Pod> = Api::namespaced(env.client.clone(), workloads);
        let mut uids: Vec<String> = api
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter_map(kube::ResourceExt::uid)
            .collect();
        uids.sort();
        uids
    };
    let workloads_before = gpu_pods().await;
    let skipped_driver = pods_of(env, DRIVER_APP).await[skipped].clone();
    let gpus: Vec<String> = others.iter().cloned().chain([skipped.to_owned()]).collect();
    let (seen, recorder) = record(env, gpus);
    env.policies()
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"daemonsets": {"labels": {LABEL: "refresh"}}}})),
        )
        .await
        .unwrap();
    let labelled = wait_until("every driver pod to carry the new label", LONG, || async {
        let pods = env
            .pods()
            .list(&ListParams::default().labels(&format!("app={DRIVER_APP},{LABEL}=refresh")))
            .await
            .unwrap();
        let on: Vec<String> = pods
            .items
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter_map(|p| p.spec.as_ref()?.node_name.clone())
            .collect();
        let done = nodes(env)
            .await
            .iter()
            .filter(|n| others.contains(&n.name_any()))
            .all(|n| state(n) == Some("upgrade-done"));
        Ok((done && others.iter().all(|n| on.contains(n))).then_some(()))
    })
    .await;
    if let Err(e) = labelled {
        let message = upgrade_message(env, name).await;
        panic!("{e}: {message}\n{}", operator.log_tail());
    }
    recorder.abort();
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    assert!(
        seen.cordoned.iter().all(|n| n == cordoned),
        "an in-place restart cordoned {:?}",
        seen.cordoned
    );
    assert_eq!(gpu_pods().await, workloads_before, "a GPU pod was evicted");
    assert_eq!(
        pods_of(env, DRIVER_APP).await[skipped],
        skipped_driver,
        "the skipped node's driver pod was restarted"
    );
    assert!(
        seen.states
            .values()
            .all(|s| !s.iter().any(|s| s == "cordon-required")),
        "a node went the full upgrade path: {:?}",
        seen.states
    );
    let events = kubectl_ok(&[
        "get",
        "events",
        "-n",
        "default",
        "--field-selector",
        "reason=DriverRestartInPlace",
        "-o",
        "name",
    ])
    .unwrap();
    assert!(
        events.lines().count() >= others.len(),
        "{} DriverRestartInPlace Event(s) for {} nodes",
        events.lines().count(),
        others.len()
    );
}
