//! A driver upgrade through a fleet of 14 GPU nodes with the real DaemonSet, disruption and
//! eviction machinery: `driver.version` is bumped with `autoUpgrade: true`,
//! `maxParallelUpgrades: 3`, `maxUnavailable: 25%` (4 nodes, one of them cordoned by its user
//! already) and `waitForCompletion.podSelector: app=training`. GPU pods are evicted (one only once
//! its PodDisruptionBudget allows it, and the node is reported stuck with the pod named until
//! then), a training job is waited for until it finishes, the operator is restarted halfway, and
//! every node ends `upgrade-done` on a driver pod of the new template having gone through NVIDIA's
//! states exactly once each, never more than 3 upgrading nor 4 unavailable; the user's cordon
//! stays, the skip-labelled node is never touched, and `autoUpgrade: false` removes the labels.
#![cfg(feature = "e2e")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::large_futures
)]

use gpu_operator_e2e::scenario as support;
mod gpu_users;
mod in_place;
mod world;

use std::time::Duration;

use gpu_operator_api::{ClusterPolicy, ClusterPolicySpec, conditions::DRIVER_UPGRADE};
use gpu_operator_harness::{access::kubectl_ok, operator::Operator, unique_name, wait_until};
use k8s_openapi::api::{apps::v1::DaemonSet, core::v1::Node};
use kube::{
    Api, ResourceExt as _,
    api::{ListParams, Patch, PatchParams, PostParams},
};
use serde_json::json;

use support::{Cleanup, Env, IMAGES, condition, gpu_nodes, pods_of, setup, simulated_nodes};
use world::{SKIP, STATE, World, record};

pub(crate) const DRIVER_APP: &str = "nvidia-driver-daemonset";
pub(crate) const LONG: Duration = Duration::from_secs(300);
/// NVIDIA's states in order, by hand (reference §1.7; drain is off, so no `drain-required`).
const PATH: [&str; 8] = [
    "upgrade-required",
    "cordon-required",
    "wait-for-jobs-required",
    "pod-deletion-required",
    "pod-restart-required",
    "validation-required",
    "uncordon-required",
    "upgrade-done",
];

pub(crate) async fn nodes(env: &Env) -> Vec<Node> {
    Api::<Node>::all(env.client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
}

pub(crate) fn state(node: &Node) -> Option<&str> {
    node.labels().get(STATE).map(String::as_str)
}

/// Whether every driver pod on `gpus` is of its DaemonSet's current template and Ready.
async fn drivers_current(env: &Env, gpus: &[String]) -> bool {
    let daemonsets: Vec<DaemonSet> = env
        .daemonsets()
        .list(&ListParams::default().labels(&format!("app={DRIVER_APP}")))
        .await
        .unwrap()
        .items;
    let pods = env
        .pods()
        .list(&ListParams::default().labels(&format!("app={DRIVER_APP}")))
        .await
        .unwrap()
        .items;
    gpus.iter().all(|node| {
        pods.iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .any(|p| {
                let on =
                    p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node.as_str());
                let owner = p.owner_references().first().map(|o| o.name.clone());
                let ds = daemonsets.iter().find(|d| Some(d.name_any()) == owner);
                let current = ds
                    .and_then(|d| d.metadata.generation)
                    .map(|g| g.to_string())
                    == p.labels().get("pod-template-generation").cloned();
                let ready = p
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
                on && current && ready
            })
    })
}

pub(crate) async fn upgrade_message(env: &Env, name: &str) -> String {
    let policy = env.policies().get(name).await.unwrap();
    condition(&policy, DRIVER_UPGRADE)
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

async fn wait_message(env: &Env, name: &str, what: &str, needles: &[&str], operator: &Operator) {
    let result = wait_until(what, LONG, || async {
        let message = upgrade_message(env, name).await;
        Ok(needles.iter().all(|n| message.contains(n)).then_some(()))
    })
    .await;
    if let Err(e) = result {
        let message = upgrade_message(env, name).await;
        panic!("{e}: {message}\n{}", operator.log_tail());
    }
}

#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "one upgrade scenario, step by step, each step asserting what the issue asks"
)]
async fn a_driver_upgrade_rolls_through_the_fleet_within_the_policy() {
    let env = setup().await;
    let mut world = World::new(&env, 8).await;
    let mut gpus = gpu_nodes(&simulated_nodes(&env.client).await);
    gpus.sort();
    assert!(gpus.len() >= 14, "{gpus:?}");
    // Roles among the first nodes by name (the order upgrades are admitted in).
    let (guarded, trained, cordoned, skipped) = (
        gpus[0].clone(),
        gpus[1].clone(),
        gpus[2].clone(),
        gpus[3].clone(),
    );
    let plain = gpus[4].clone();
    for node in &gpus[..5] {
        world.touch(node);
    }
    world.gpu_replicaset("guarded", &guarded);
    world.pdb("guarded", 1);
    world.gpu_replicaset("inference", &plain);
    world.runtime_replicaset("render", &plain);
    world.gpu_daemonset("exporter", &plain);
    world.client_daemonset("profiler", &plain);
    world.dra_replicaset("infer-dra", &plain);
    world.training_job("train-0", &trained);
    kubectl_ok(&["cordon", &cordoned]).unwrap();
    kubectl_ok(&["label", "node", &skipped, &format!("{SKIP}=true")]).unwrap();

    let mut operator = env.start(&IMAGES);
    let name = unique_name("driver-upgrade");
    let _cleanup = Cleanup {
        namespace: env.namespace.clone(),
        policies: vec![name.clone()],
    };
    let mut spec = ClusterPolicySpec::default();
    spec.driver.upgrade_policy = Some(
        serde_json::from_value(json!({
            "autoUpgrade": true, "maxParallelUpgrades": 3, "maxUnavailable": "25%",
            "waitForCompletion": {"podSelector": "app=training"},
            "podDeletion": {"timeoutSeconds": 0}
        }))
        .unwrap(),
    );
    env.policies()
        .create(&PostParams::default(), &ClusterPolicy::new(&name, spec))
        .await
        .unwrap();

    // Converged: every driver pod current, every node but the skipped one upgrade-done.
    let others: Vec<String> = gpus.iter().filter(|n| **n != skipped).cloned().collect();
    wait_until("every node upgrade-done before the bump", LONG, || async {
        let all = nodes(&env).await;
        let done = all
            .iter()
            .filter(|n| others.contains(&n.name_any()))
            .all(|n| state(n) == Some("upgrade-done"));
        Ok((done && drivers_current(&env, &gpus).await).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", operator.log_tail()));
    let skipped_driver = pods_of(&env, DRIVER_APP).await[&skipped].clone();
    let users = gpu_users::Before::read(&env, &world.namespace, &plain).await;
    let (seen, recorder) = record(&env, gpus.clone());

    env.policies()
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"driver": {"repository": "nvcr.io/nvidia", "image": "driver", "version": "580.95.05"}}})),
        )
        .await
        .unwrap();
    // Stuck nodes are named with the reason: the job still running, the pod the PDB protects.
    wait_message(
        &env,
        &name,
        "the guarded node stuck on its PDB",
        &[&guarded, "PodDisruptionBudget", "/guarded-"],
        &operator,
    )
    .await;
    wait_message(
        &env,
        &name,
        "the job node waiting for train-0",
        &[&trained, "/train-0"],
        &operator,
    )
    .await;

    // An operator restart halfway: SIGTERM mid-upgrade ends it within the bound, and the next
    // one resumes from the labels.
    let took = operator.stop().unwrap();
    assert!(
        took < support::SHUTDOWN_BOUND,
        "SIGTERM mid-upgrade: the operator took {took:?} to exit"
    );
    operator = Operator::start(
        &env.kubeconfig,
        &env.namespace,
        &IMAGES,
        &env.dir.join("operator-2.log"),
    )
    .unwrap();
    wait_message(
        &env,
        &name,
        "the restarted operator to find the PDB again",
        &[&guarded, "PodDisruptionBudget"],
        &operator,
    )
    .await;
    let before = seen.lock().unwrap().states.clone();
    assert_eq!(
        before[&guarded].last().map(String::as_str),
        Some("pod-deletion-required"),
        "{before:?}"
    );
    assert_eq!(
        before[&trained].last().map(String::as_str),
        Some("wait-for-jobs-required"),
        "{before:?}"
    );

    // The DaemonSet GPU user that does not select the client label holds the node, named.
    wait_message(
        &env,
        &name,
        "the DaemonSet GPU user named as blocking",
        &[&plain, "/exporter-", "eviction does not move them"],
        &operator,
    )
    .await;
    gpu_users::client_label_paused(&env, &plain).await;
    gpu_users::select_the_client_label(&world.namespace, "exporter");
    world.finish("train-0");
    world.pdb("guarded", 0);
    let upgraded = wait_until("every node upgraded", LONG, || async {
        let all = nodes(&env).await;
        let done = all
            .iter()
            .filter(|n| others.contains(&n.name_any()))
            .all(|n| state(n) == Some("upgrade-done"));
        Ok((done && drivers_current(&env, &others).await).then_some(()))
    })
    .await;
    if let Err(e) = upgraded {
        let message = upgrade_message(&env, &name).await;
        panic!("{e}: {message}\n{}", operator.log_tail());
    }
    recorder.abort();
    users.were_moved(&env, &world.namespace, &plain).await;
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    for node in &others {
        assert_eq!(
            seen.states[node], PATH,
            "{node} went another way: {:?}",
            seen.states
        );
    }
    assert!(
        seen.max_in_progress <= 3,
        "{} nodes upgraded at once",
        seen.max_in_progress
    );
    assert!(
        seen.max_in_progress >= 2,
        "the upgrade ran nodes in parallel: {}",
        seen.max_in_progress
    );
    assert!(
        seen.max_unavailable <= 4,
        "{} GPU nodes unavailable at once",
        seen.max_unavailable
    );

    let all = nodes(&env).await;
    let cordon = |n: &str| {
        all.iter()
            .find(|x| x.name_any() == n)
            .and_then(|x| x.spec.clone()?.unschedulable)
            .unwrap_or(false)
    };
    assert!(cordon(&cordoned), "the user's cordon was lifted");
    assert!(
        others
            .iter()
            .filter(|n| **n != cordoned)
            .all(|n| !cordon(n)),
        "a node stayed cordoned"
    );
    // The skipped node: never labelled, never cordoned, its driver pod never replaced.
    assert!(
        !seen.states.contains_key(&skipped) && !seen.cordoned.contains(&skipped),
        "{seen:?}"
    );
    assert_eq!(pods_of(&env, DRIVER_APP).await[&skipped], skipped_driver);
    // The condition follows the node labels (conditions are written in batches, moments later).
    let policy = support::wait_policy(&env, &name, "the upgrade to be reported done", |p| {
        condition(p, DRIVER_UPGRADE).is_some_and(|c| c.status == "True")
    })
    .await;
    let done = condition(&policy, DRIVER_UPGRADE).unwrap();
    assert_eq!(
        (done.status.as_str(), done.reason.as_str()),
        ("True", "NodesSkipped"),
        "{done:?}"
    );
    assert!(
        done.message.starts_with(&format!(
            "{}/{} GPU nodes on the current driver",
            gpus.len() - 1,
            gpus.len()
        )),
        "{}",
        done.message
    );
    let events = kubectl_ok(&[
        "get",
        "events",
        "-n",
        "default",
        "--field-selector",
        &format!("involvedObject.name={plain},reason=DriverUpgradeDone"),
        "-o",
        "name",
    ])
    .unwrap();
    assert!(
        !events.trim().is_empty(),
        "no DriverUpgradeDone Event for {plain}"
    );

    in_place::template_changes_restart_driver_pods_in_place(
        &env,
        &name,
        (&others, &skipped, &cordoned),
        &world.namespace,
        &operator,
    )
    .await;

    gpu_users::an_unmatched_selector_is_said_once(&env, &name).await;

    // autoUpgrade off: the labels go.
    env.policies()
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"driver": {"upgradePolicy": {"autoUpgrade": false}}}})),
        )
        .await
        .unwrap();
    wait_until("the upgrade labels removed", LONG, || async {
        let all = nodes(&env).await;
        Ok(all
            .iter()
            .all(|n| {
                state(n).is_none()
                    && !n
                        .annotations()
                        .contains_key("nvidia.com/gpu-driver-upgrade-enabled")
            })
            .then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", operator.log_tail()));
    operator.stop().unwrap();
}
