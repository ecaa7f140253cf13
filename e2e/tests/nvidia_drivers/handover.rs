//! The driver changing hands between the ClusterPolicy and NVIDIADrivers
//! (`driver.useNvidiaDriverCRD` switched either way) without a restart: the old owner's driver
//! DaemonSets go with orphan propagation, so every running driver pod keeps its UID; the new
//! owner's pod for that node waits (one driver pod per node) until the old one goes, as the
//! upgrade deletes it — each step's positive control deletes one and sees the new owner's pod run
//! there. A pod left running is controlled by the owner that handed it over (no DaemonSet adopts
//! it); a pod that still waited for a node goes with its DaemonSet.

use std::collections::BTreeMap;

use gpu_operator_api::NvidiaDriver;
use gpu_operator_harness::wait_until;
use k8s_openapi::api::{apps::v1::DaemonSet, core::v1::Pod};
use kube::{
    ResourceExt as _,
    api::{DeleteParams, Patch, PatchParams},
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

/// The pods labelled `app=<app>` in the operator's namespace, not being deleted.
async fn pods(env: &Env, app: &str) -> Vec<Pod> {
    crate::support::live_pods(env, &env.namespace, app).await
}

/// The kind and name of what controls `pod`, if anything.
fn controller(pod: &Pod) -> Option<(String, String)> {
    pod.owner_references()
        .iter()
        .find(|r| r.controller == Some(true))
        .map(|r| (r.kind.clone(), r.name.clone()))
}

/// Pod UIDs by node of `pods`, those a node runs.
fn by_node(pods: &[Pod]) -> BTreeMap<String, String> {
    pods.iter()
        .filter_map(|p| Some((p.spec.as_ref()?.node_name.clone()?, p.uid()?)))
        .collect()
}

/// Whether a driver DaemonSet of the ClusterPolicy is among `all`.
fn has_policy_driver(all: &BTreeMap<String, DaemonSet>) -> bool {
    all.values().any(|ds| {
        ds.owner_references()
            .iter()
            .any(|r| r.kind == "ClusterPolicy" && r.controller == Some(true))
    })
}

/// The `app` labels of the DaemonSets of `cr` (one per OS of the fleet).
async fn apps_of(env: &Env, cr: &NvidiaDriver) -> Vec<String> {
    let all = driver_daemonsets(env).await;
    let apps: Vec<String> = owned_by(&all, cr)
        .iter()
        .map(|ds| ds.labels()["app"].clone())
        .collect();
    assert!(!apps.is_empty(), "the DaemonSets of {}", cr.name_any());
    apps
}

/// Pod UIDs by node of the DaemonSets labelled `apps`.
async fn scheduled(env: &Env, apps: &[String]) -> BTreeMap<String, String> {
    let mut all = BTreeMap::new();
    for app in apps {
        all.extend(pods_of(env, app).await);
    }
    all
}

/// Deletes the pod of `app` on `node` (what the upgrade does) and waits until a pod of `next`
/// runs there.
async fn replace(env: &Env, app: &str, node: &str, next: &[String]) {
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
        &format!("a pod of {next:?} on {node} once the {app} pod went"),
        TIMEOUT,
        || async { Ok(scheduled(env, next).await.contains_key(node).then_some(())) },
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
            let done = !has_policy_driver(&all)
                && !owned_by(&all, a).is_empty()
                && !owned_by(&all, b).is_empty();
            Ok(done.then_some(()))
        },
    )
    .await
    .unwrap();
    // Fails if the DaemonSets went with their pods: every one is still there, the
    // ClusterPolicy's.
    let left = wait_until(
        "the old driver pods handed to the ClusterPolicy",
        TIMEOUT,
        || async {
            let left = pods(env, POLICY_DRIVER).await;
            let kept = left
                .iter()
                .all(|p| controller(p).is_some_and(|(kind, _)| kind == "ClusterPolicy"));
            Ok(kept.then_some(left))
        },
    )
    .await
    .unwrap();
    assert_eq!(
        &by_node(&left),
        before,
        "the running driver pods keep their UIDs"
    );
    let (app_a, app_b) = (apps_of(env, a).await, apps_of(env, b).await);
    for (apps, node) in [(&app_a, node_a), (&app_b, node_b)] {
        assert!(
            !scheduled(env, apps).await.contains_key(node),
            "{apps:?} wait while the old driver pod runs on {node}"
        );
    }
    // Its overall status says so (and turns ready once the pod runs: see the caller).
    crate::status::wait_overall(
        env,
        &a.name_any(),
        "notReady",
        gpu_operator_api::conditions::reason::DRIVER_NOT_READY,
        &["ready on 0/1 GPU nodes"],
    )
    .await;
    // The positive control: once the old pod goes, the NVIDIADriver's runs there.
    replace(env, POLICY_DRIVER, node_a, &app_a).await;
    assert_eq!(
        pods_of(env, POLICY_DRIVER).await.get(node_b),
        before.get(node_b),
        "the other nodes keep theirs until their upgrade"
    );
    scheduled(env, &app_a).await[node_a].clone()
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
    let (app_a, app_b) = (apps_of(env, a).await, apps_of(env, b).await);
    switch(env, policy, false).await;
    let mut kept = before.clone();
    kept.remove(node_a);
    wait_until(
        "the NVIDIADrivers' DaemonSets to go and the ClusterPolicy's to come",
        TIMEOUT,
        || async {
            let all = driver_daemonsets(env).await;
            let gone = owned_by(&all, a).is_empty() && owned_by(&all, b).is_empty();
            Ok((gone && has_policy_driver(&all)).then_some(()))
        },
    )
    .await
    .unwrap();
    let a_pods = wait_until("a's running pod handed to it", TIMEOUT, || async {
        let mut a_pods = Vec::new();
        for app in &app_a {
            a_pods.extend(pods(env, app).await);
        }
        let kept = a_pods
            .iter()
            .all(|p| controller(p).is_some_and(|(kind, _)| kind == "NVIDIADriver"));
        Ok(kept.then_some(a_pods))
    })
    .await
    .unwrap();
    assert_eq!(a_pods.len(), 1, "{app_a:?}: the running pod stays");
    assert_eq!(a_pods[0].uid().as_deref(), Some(a_uid));
    // The old ClusterPolicy pods still run as they were, none adopted by a new DaemonSet.
    let old = pods(env, POLICY_DRIVER).await;
    let old: Vec<Pod> = old
        .into_iter()
        .filter(|p| controller(p).is_some_and(|(kind, _)| kind == "ClusterPolicy"))
        .collect();
    assert_eq!(by_node(&old), kept, "the old driver pods keep their UIDs");
    for app in &app_b {
        assert!(
            pods(env, app).await.is_empty(),
            "{app}: the pod that waited for a node went with its DaemonSet"
        );
    }
    let new: Vec<Pod> = pods(env, POLICY_DRIVER)
        .await
        .into_iter()
        .filter(|p| controller(p).is_some_and(|(kind, _)| kind == "DaemonSet"))
        .collect();
    assert!(
        by_node(&new).is_empty(),
        "the ClusterPolicy's new pods wait while the old ones run: {:?}",
        by_node(&new)
    );
    let a_app = a_pods[0].labels()["app"].clone();
    replace(env, &a_app, node_a, &[POLICY_DRIVER.to_owned()]).await;
}
