//! The driver DaemonSets through fleet changes, with the real DaemonSet controller: a one-OS fleet
//! has exactly `nvidia-driver-daemonset`; nodes of a second OS get a DaemonSet of their own while
//! no existing driver pod is deleted or restarted (same UIDs, same template generation), and the
//! per-OS DaemonSet goes with its last node. Then a driver change under `OnDelete`: DriverReady
//! counts the nodes that still run the old revision instead of claiming ready, and deleting one
//! pod (a node updated) brings the count down.
#![cfg(feature = "e2e")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::large_futures
)]

use gpu_operator_e2e::scenario as support;

use std::collections::{BTreeMap, BTreeSet};

use gpu_operator_api::{ClusterPolicy, ClusterPolicySpec, conditions::operand::DRIVER_READY};
use gpu_operator_harness::{access::kubectl_ok, fleet::Profile, unique_name, wait_until};
use k8s_openapi::api::{apps::v1::DaemonSet, core::v1::Node};
use kube::{
    Api, ResourceExt as _,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
};
use serde_json::json;

use support::{
    Cleanup, Env, IMAGES, TEMPORARY, TIMEOUT, condition, gpu_nodes, pods_of, setup,
    simulated_nodes, wait_policy,
};

const DRIVER_APP: &str = "nvidia-driver-daemonset";
const OS_ID: &str = "feature.node.kubernetes.io/system-os_release.ID";
const OS_VERSION: &str = "feature.node.kubernetes.io/system-os_release.VERSION_ID";

/// Gives every GPU node Ubuntu 22.04 while it lives (a one-OS fleet), then its OS labels back.
struct OneOs(Vec<(String, String, String)>);

impl OneOs {
    async fn apply(client: &kube::Client) -> (Self, (String, String)) {
        let nodes = simulated_nodes(client).await;
        let gpus = gpu_nodes(&nodes);
        let mut original = Vec::new();
        for node in nodes.iter().filter(|n| gpus.contains(&n.name_any())) {
            let labels = node.labels();
            original.push((
                node.name_any(),
                labels[OS_ID].clone(),
                labels[OS_VERSION].clone(),
            ));
        }
        let (id, version) = ("ubuntu".to_owned(), "22.04".to_owned());
        for (name, ..) in &original {
            relabel(name, &id, &version);
        }
        (Self(original), (id, version))
    }
}

impl Drop for OneOs {
    fn drop(&mut self) {
        for (name, id, version) in &self.0 {
            relabel(name, id, version);
        }
    }
}

fn relabel(node: &str, id: &str, version: &str) {
    kubectl_ok(&[
        "label",
        "node",
        node,
        "--overwrite",
        &format!("{OS_ID}={id}"),
        &format!("{OS_VERSION}={version}"),
    ])
    .unwrap();
}

/// Deletes the nodes this scenario added, also when a step panics.
struct AddedNodes(Vec<String>);

impl Drop for AddedNodes {
    fn drop(&mut self) {
        for node in &self.0 {
            let _ = kubectl_ok(&["delete", "node", node, "--ignore-not-found", "--wait=false"]);
        }
    }
}

async fn driver_daemonsets(env: &Env) -> BTreeMap<String, DaemonSet> {
    env.daemonsets()
        .list(&ListParams::default().labels(&format!("app={DRIVER_APP}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|ds| (ds.name_any(), ds))
        .collect()
}

/// Waits until the driver DaemonSets are exactly `names`, each with a ready pod on every node it
/// wants, and returns them.
async fn wait_driver_daemonsets(env: &Env, names: &[&str]) -> BTreeMap<String, DaemonSet> {
    let names: BTreeSet<String> = names.iter().map(|n| (*n).to_owned()).collect();
    let found = wait_until("the expected driver DaemonSets, ready", TIMEOUT, || async {
        let found = driver_daemonsets(env).await;
        let ready = found.keys().cloned().collect::<BTreeSet<_>>() == names
            && found.values().all(|ds| {
                let s = ds.status.clone().unwrap_or_default();
                s.desired_number_scheduled > 0 && s.number_ready == s.desired_number_scheduled
            });
        Ok(ready.then_some(found))
    })
    .await;
    found.unwrap_or_else(|error| panic!("{error}; wanted {names:?}"))
}

fn generation(ds: &DaemonSet) -> i64 {
    ds.metadata.generation.unwrap()
}

/// A driver change under OnDelete: nothing restarts, and DriverReady says how many nodes still
/// run the old revision; one pod deleted (that node updated) counts one fewer.
async fn old_revisions_are_counted_not_restarted(
    env: &Env,
    name: &str,
    before: &BTreeMap<String, String>,
) {
    env.policies()
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(
                &json!({"spec": {"driver": {"env": [{"name": "E2E_REVISION", "value": "2"}]}}}),
            ),
        )
        .await
        .unwrap();
    let count = before.len();
    let policy = wait_policy(env, name, "DriverReady to count old revisions", |p| {
        condition(p, DRIVER_READY).is_some_and(|c| {
            c.status == "False"
                && c.reason == "OldRevision"
                && c.message.contains(&format!(
                    "{count} node(s) run an old revision of {DRIVER_APP}"
                ))
        })
    })
    .await;
    assert_eq!(
        pods_of(env, DRIVER_APP).await,
        *before,
        "a driver pod was restarted"
    );
    let message = condition(&policy, DRIVER_READY).unwrap().message.clone();
    // One node updated by hand: one fewer on the old revision.
    let (node, _) = before.iter().next().unwrap();
    let pod = env
        .pods()
        .list(&ListParams::default().labels(&format!("app={DRIVER_APP}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node.as_str()))
        .unwrap();
    env.pods()
        .delete(&pod.name_any(), &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    let remaining = count - 1;
    wait_policy(env, name, "DriverReady to count one node fewer", |p| {
        condition(p, DRIVER_READY).is_some_and(|c| {
            c.message.contains(&format!(
                "{remaining} node(s) run an old revision of {DRIVER_APP}"
            ))
        })
    })
    .await;
    assert!(message.contains("OnDelete"), "{message}");
}

#[tokio::test]
async fn a_second_os_adds_a_driver_daemonset_without_touching_the_running_drivers() {
    let env = setup().await;
    let (_one_os, (id, version)) = OneOs::apply(&env.client).await;
    let operator = env.start(&IMAGES);
    let name = unique_name("driver-transitions");
    let _cleanup = Cleanup {
        namespace: env.namespace.clone(),
        policies: vec![name.clone()],
    };
    env.policies()
        .create(
            &PostParams::default(),
            &ClusterPolicy::new(&name, ClusterPolicySpec::default()),
        )
        .await
        .unwrap();

    // One OS: exactly NVIDIA's name.
    let single = wait_driver_daemonsets(&env, &[DRIVER_APP]).await;
    let first_generation = generation(&single[DRIVER_APP]);
    let before = pods_of(&env, DRIVER_APP).await;
    assert_eq!(
        before.len(),
        gpu_nodes(&simulated_nodes(&env.client).await).len()
    );

    // A node of a second OS (the A100 profile is RHEL 9.4).
    let newcomer = unique_name("rhel-gpu");
    let node = Profile::A100.node(&newcomer);
    let mut node: Node = node;
    node.labels_mut()
        .insert(TEMPORARY.to_owned(), "true".to_owned());
    assert_ne!(
        (
            node.labels()[OS_ID].as_str(),
            node.labels()[OS_VERSION].as_str()
        ),
        (id.as_str(), version.as_str())
    );
    let _added = AddedNodes(vec![newcomer.clone()]);
    Api::<Node>::all(env.client.clone())
        .create(&PostParams::default(), &node)
        .await
        .unwrap();
    let per_os = "nvidia-driver-daemonset-rhel9.4";
    let mixed = wait_driver_daemonsets(&env, &[DRIVER_APP, per_os]).await;
    let during = pods_of(&env, DRIVER_APP).await;
    assert!(
        during.contains_key(&newcomer),
        "the new node gets a driver: {during:?}"
    );
    for (node, uid) in &before {
        assert_eq!(during.get(node), Some(uid), "driver pod on {node} replaced");
    }
    assert_eq!(
        generation(&mixed[DRIVER_APP]),
        first_generation,
        "the first OS's DaemonSet template changed"
    );

    // The last node of the second OS leaves: its DaemonSet goes, the first stays untouched.
    Api::<Node>::all(env.client.clone())
        .delete(&newcomer, &DeleteParams::default())
        .await
        .unwrap();
    let back = wait_driver_daemonsets(&env, &[DRIVER_APP]).await;
    assert_eq!(generation(&back[DRIVER_APP]), first_generation);
    // The pod of the removed node goes with its node and DaemonSet (garbage collection, a moment
    // after the DaemonSet): wait for that, then compare.
    let after = wait_until("the removed node's driver pod to go", TIMEOUT, || async {
        let pods = pods_of(&env, DRIVER_APP).await;
        Ok((!pods.contains_key(&newcomer)).then_some(pods))
    })
    .await
    .unwrap();
    assert_eq!(after, before, "driver pods changed across the transition");

    old_revisions_are_counted_not_restarted(&env, &name, &before).await;
    operator.stop().unwrap();
}
