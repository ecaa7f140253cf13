//! The driver changing hands between the ClusterPolicy and NVIDIADrivers
//! (`driver.useNvidiaDriverCRD` switched either way) without a restart: the old owner's driver
//! DaemonSets go with orphan propagation, so every running driver pod keeps its UID; the new
//! owner's pod for that node waits (one driver pod per node) until the old one goes, as the
//! upgrade deletes it — each step's positive control deletes one and sees the new owner's pod run
//! there. The ClusterPolicy's DaemonSet adopts the old ClusterPolicy pods it finds again; an
//! NVIDIADriver pod that was still waiting for a node goes with its DaemonSet.

use std::collections::BTreeMap;

use gpu_operator_api::NvidiaDriver;
use gpu_operator_harness::wait_until;
use k8s_openapi::api::core::v1::Pod;
use kube::{
    ResourceExt as _,
    api::{DeleteParams, ListParams, Patch, PatchParams},
};
use serde_json::json;

use crate::{
    driver_daemonsets, owned_by,
    support::{Env, TIMEOUT, pods_of},
};

/// The `app` label of the ClusterPolicy's driver DaemonSet and pods (NVIDIA's name).
pub const POLICY_DRIVER: &str = "nvidia-driver-daemonset";

/// Sets `driver.useNvidiaDriverCRD` of ClusterPolicy `policy` to `on`.
pub async fn switch(env: &Env, policy: &str, on: bool) {
    env.policies()
        .patch(
            policy,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"driver": {"useNvidiaDriverCRD": on}}})),
        )
        .await
        .unwrap();
}

/// The pods labelled `app=<app>`, not being deleted.
async fn pods(env: &Env, app: &str) -> Vec<Pod> {
    env.pods()
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect()
}

/// The name of the DaemonSet that controls `pod`, if any.
fn controller(pod: &Pod) -> Option<String> {
    pod.owner_references()
        .iter()
        .find(|r| r.controller == Some(true))
        .map(|r| r.name.clone())
}

/// The `app` label of the one DaemonSet of `cr`.
async fn app_of(env: &Env, cr: &NvidiaDriver) -> String {
    let all = driver_daemonsets(env).await;
    let owned = owned_by(&all, cr);
    assert_eq!(owned.len(), 1, "one DaemonSet of {}", cr.name_any());
    owned[0].labels()["app"].clone()
}

/// Deletes the pod of `app` on `node` (what the upgrade does) and waits until a pod of `next`
/// runs there.
async fn replace(env: &Env, app: &str, node: &str, next: &str) {
    let old = pods(env, app).await;
    let pod = old
        .iter()
        .find(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
        .unwrap_or_else(|| panic!("no pod of {app} on {node}"));
    env.pods()
        .delete(&pod.name_any(), &DeleteParams::default())
        .await
        .unwrap();
    wait_until(
        &format!("a pod of {next} on {node} once the {app} pod went"),
        TIMEOUT,
        || async { Ok(pods_of(env, next).await.contains_key(node).then_some(())) },
    )
    .await
    .unwrap();
}

/// The switch to NVIDIADrivers (`a` selects `node_a`, `b` `node_b`): the ClusterPolicy's driver
/// pods `before` (UID by node) keep running unowned; `a`'s and `b`'s pods wait; deleting the old
/// pod on `node_a` lets `a`'s run there. Returns `a`'s pod UID on `node_a`.
pub async fn to_nvidia_drivers(
    env: &Env,
    policy: &str,
    before: &BTreeMap<String, String>,
    (a, node_a): (&NvidiaDriver, &str),
    (b, node_b): (&NvidiaDriver, &str),
) -> String {
    switch(env, policy, true).await;
    wait_until(
        "the ClusterPolicy's driver DaemonSet to go and both NVIDIADrivers' to come",
        TIMEOUT,
        || async {
            let all = driver_daemonsets(env).await;
            let done = !all.contains_key(POLICY_DRIVER)
                && !owned_by(&all, a).is_empty()
                && !owned_by(&all, b).is_empty();
            Ok(done.then_some(()))
        },
    )
    .await
    .unwrap();
    // Fails if the DaemonSet went with its pods: every one is still there, unowned.
    let left = pods(env, POLICY_DRIVER).await;
    let uids: BTreeMap<String, String> = left
        .iter()
        .filter_map(|p| Some((p.spec.as_ref()?.node_name.clone()?, p.uid()?)))
        .collect();
    assert_eq!(&uids, before, "the running driver pods keep their UIDs");
    assert!(
        left.iter().all(|p| controller(p).is_none()),
        "the old driver pods are orphans"
    );
    let (app_a, app_b) = (app_of(env, a).await, app_of(env, b).await);
    for (app, node) in [(&app_a, node_a), (&app_b, node_b)] {
        assert!(
            !pods_of(env, app).await.contains_key(node),
            "{app} waits while the old driver pod runs on {node}"
        );
    }
    // The positive control: once the old pod goes, the NVIDIADriver's runs there.
    replace(env, POLICY_DRIVER, node_a, &app_a).await;
    assert_eq!(
        pods_of(env, POLICY_DRIVER).await.get(node_b),
        before.get(node_b),
        "the other nodes keep theirs until their upgrade"
    );
    pods_of(env, &app_a).await[node_a].clone()
}

/// The switch back: `a`'s running pod on `node_a` (`a_uid`) keeps running unowned, `b`'s pod
/// that still waited goes, the ClusterPolicy's DaemonSet adopts the old pods (`before`, but on
/// `node_a`) with their UIDs, and its own pod waits on `node_a` until `a`'s goes.
pub async fn to_cluster_policy(
    env: &Env,
    policy: &str,
    before: &BTreeMap<String, String>,
    (a, node_a, a_uid): (&NvidiaDriver, &str, &str),
    b: &NvidiaDriver,
) {
    let (app_a, app_b) = (app_of(env, a).await, app_of(env, b).await);
    switch(env, policy, false).await;
    let mut kept = before.clone();
    kept.remove(node_a);
    wait_until(
        "the NVIDIADrivers' DaemonSets to go and the ClusterPolicy's to adopt the old pods",
        TIMEOUT,
        || async {
            let all = driver_daemonsets(env).await;
            let gone = owned_by(&all, a).is_empty() && owned_by(&all, b).is_empty();
            let adopted: BTreeMap<String, String> = pods(env, POLICY_DRIVER)
                .await
                .iter()
                .filter(|p| controller(p).as_deref() == Some(POLICY_DRIVER))
                .filter_map(|p| Some((p.spec.as_ref()?.node_name.clone()?, p.uid()?)))
                .collect();
            Ok((gone && all.contains_key(POLICY_DRIVER) && adopted == kept).then_some(()))
        },
    )
    .await
    .unwrap();
    let a_pods = pods(env, &app_a).await;
    assert_eq!(a_pods.len(), 1, "{app_a}: its running pod stays");
    assert_eq!(a_pods[0].uid().as_deref(), Some(a_uid));
    assert!(controller(&a_pods[0]).is_none(), "{app_a}'s pod is an orphan");
    assert!(
        pods(env, &app_b).await.is_empty(),
        "{app_b}'s pod that waited for a node went with its DaemonSet"
    );
    assert!(
        !pods_of(env, POLICY_DRIVER).await.contains_key(node_a),
        "the ClusterPolicy's pod waits while {app_a}'s runs"
    );
    replace(env, &app_a, node_a, POLICY_DRIVER).await;
}
