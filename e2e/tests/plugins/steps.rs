//! The steps of the plugins' end-to-end scenario, in the order the test runs them.

use std::{collections::BTreeMap, time::Duration};

use gpu_operator_api::conditions::{READY, operand};
use gpu_operator_harness::{operator::writes_by, wait_until};
use k8s_openapi::{
    api::{apps::v1::DaemonSet, core::v1::Node},
    jiff::Timestamp,
};
use kube::{
    Api, ResourceExt as _,
    api::{ListParams, Patch, PatchParams},
};
use serde_json::json;

use super::support::*;

/// The label `daemonsets.labels` puts on every operand pod.
pub const LABEL: (&str, &str) = ("e2e.example.com/stack", "plugins");
pub const GFD: &str = "gpu-feature-discovery";
pub const MPS: &str = "nvidia-device-plugin-mps-control-daemon";
/// The DaemonSets a `mig.strategy` change rolls.
const MIG_FOLLOWERS: [&str; 4] = [PLUGIN, GFD, MPS, VALIDATOR];

pub async fn daemonset(env: &Env, name: &str) -> DaemonSet {
    env.daemonsets().get(name).await.unwrap()
}

pub fn containers(ds: &DaemonSet) -> Vec<k8s_openapi::api::core::v1::Container> {
    let pod = ds.spec.clone().unwrap().template.spec.unwrap();
    pod.init_containers
        .unwrap_or_default()
        .into_iter()
        .chain(pod.containers)
        .collect()
}

/// The value of `name` in the first container of `ds` that sets it.
pub fn env_value(ds: &DaemonSet, name: &str) -> Option<String> {
    containers(ds)
        .iter()
        .flat_map(|c| c.env.clone().unwrap_or_default())
        .find(|e| e.name == name)
        .and_then(|e| e.value)
}

async fn generations(env: &Env) -> BTreeMap<String, i64> {
    let list = env.daemonsets().list(&ListParams::default()).await.unwrap();
    list.items
        .iter()
        .map(|d| (d.name_any(), d.metadata.generation.unwrap_or_default()))
        .collect()
}

pub async fn patch_policy(env: &Env, name: &str, patch: serde_json::Value) {
    env.policies()
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// Sets (or with `None` removes) `nvidia.com/mps.capable` on `node`, as GFD would.
pub async fn mps_capable(env: &Env, node: &str, value: Option<&str>) {
    let patch = json!({"metadata": {"labels": {"nvidia.com/mps.capable": value}}});
    Api::<Node>::all(env.client.clone())
        .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// Every operand Ready on the GPU nodes, the MPS daemon on an `mps.capable` node, the common
/// label on every pod, GFDReady true.
pub async fn operands_become_ready_with_the_common_labels(env: &Env, name: &str) {
    let ready = wait_policy(env, name, "the ClusterPolicy to become ready", is_ready).await;
    let gfd = condition(&ready, operand::GFD_READY).unwrap();
    assert_eq!(gfd.status, "True", "{gfd:?}");
    let gpus = gpu_nodes(&simulated_nodes(&env.client).await);
    let mps_node = gpus.first().unwrap().clone();
    mps_capable(env, &mps_node, Some("true")).await;
    for app in [PLUGIN, GFD, VALIDATOR] {
        wait_ds_ready(env, app, None).await;
        let pods = pods_of(env, app).await;
        assert!(gpus.iter().all(|g| pods.contains_key(g)), "{app}: {pods:?}");
    }
    wait_ds_ready(env, MPS, Some(&mps_node)).await;
    assert_eq!(
        pods_of(env, MPS).await.len(),
        1,
        "only the mps.capable node"
    );
    let labelled = env
        .pods()
        .list(&ListParams::default().labels(&format!("{}={}", LABEL.0, LABEL.1)))
        .await
        .unwrap();
    for app in MIG_FOLLOWERS {
        assert!(
            labelled
                .items
                .iter()
                .any(|p| p.labels().get("app").map(String::as_str) == Some(app)),
            "{app} pods carry daemonsets.labels"
        );
    }
}

/// `mig.strategy: mixed` rolls the plugin, GFD, MPS daemon and validator with the new env; no
/// other DaemonSet changes.
pub async fn mig_strategy_rolls_exactly_the_four(env: &Env, name: &str) {
    let before = generations(env).await;
    patch_policy(env, name, json!({"spec": {"mig": {"strategy": "mixed"}}})).await;
    wait_until("MIG_STRATEGY=mixed on the four", TIMEOUT, || async {
        for app in MIG_FOLLOWERS {
            if env_value(&daemonset(env, app).await, "MIG_STRATEGY").as_deref() != Some("mixed") {
                return Ok(None);
            }
        }
        Ok(Some(()))
    })
    .await
    .unwrap();
    wait_policy(env, name, "the ClusterPolicy to be ready again", is_ready).await;
    let after = generations(env).await;
    for (ds, generation) in &before {
        let rolled = MIG_FOLLOWERS.contains(&ds.as_str());
        assert_eq!(
            after[ds] > *generation,
            rolled,
            "{ds}: generation {generation} -> {}",
            after[ds]
        );
    }
    let plugin = daemonset(env, PLUGIN).await;
    assert_eq!(
        env_value(&plugin, "NVIDIA_MIG_MONITOR_DEVICES").as_deref(),
        Some("all")
    );
}

/// `gfd.enabled: false` deletes GFD and says so; `true` brings it back Ready.
pub async fn gfd_can_be_disabled_and_enabled(env: &Env, name: &str) {
    patch_policy(env, name, json!({"spec": {"gfd": {"enabled": false}}})).await;
    wait_policy(env, name, "GFDReady to say disabled", |p| {
        condition(p, operand::GFD_READY).is_some_and(|c| {
            c.reason == "Disabled" && c.observed_generation == p.metadata.generation
        })
    })
    .await;
    wait_until("GFD to be deleted", TIMEOUT, || async {
        Ok(env.daemonsets().get_opt(GFD).await?.is_none().then_some(()))
    })
    .await
    .unwrap();
    assert!(env.daemonsets().get_opt(PLUGIN).await.unwrap().is_some());
    patch_policy(env, name, json!({"spec": {"gfd": {"enabled": true}}})).await;
    wait_ds_ready(env, GFD, None).await;
    wait_policy(env, name, "the ClusterPolicy to be ready again", is_ready).await;
}

/// Someone edits the plugin DaemonSet by hand; the operator puts it back.
pub async fn a_hand_edit_is_reverted(env: &Env) {
    let edit = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "nvidia-device-plugin", "env": [{"name": "MIG_STRATEGY", "value": "single"}]}
    ]}}}});
    env.daemonsets()
        .patch(PLUGIN, &PatchParams::default(), &Patch::Strategic(&edit))
        .await
        .unwrap();
    wait_until("the hand edit to be reverted", TIMEOUT, || async {
        let value = env_value(&daemonset(env, PLUGIN).await, "MIG_STRATEGY");
        Ok((value.as_deref() == Some("mixed")).then_some(()))
    })
    .await
    .unwrap();
    wait_ds_ready(env, PLUGIN, None).await;
}

/// A spec change none of these operands renders re-renders all and writes none: no DaemonSet
/// request in the audit log (read once every operand has reconciled the new generation, the
/// marker), one status request acknowledging it for every operand and the ClusterPolicy, and no
/// pod restarts.
pub async fn a_no_op_change_restarts_nothing(env: &Env, name: &str) {
    wait_settled(env, name, Duration::from_secs(5)).await;
    let apps = [PLUGIN, GFD, MPS, VALIDATOR];
    let mut pods = Vec::new();
    for app in apps {
        pods.push(pods_of(env, app).await);
    }
    let versions = |list: Vec<DaemonSet>| {
        list.into_iter()
            .map(|d| (d.name_any(), d.resource_version()))
            .collect::<BTreeMap<_, _>>()
    };
    let before = versions(
        env.daemonsets()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items,
    );
    let changed_at = Timestamp::now();
    patch_policy(env, name, json!({"spec": {"psp": {"enabled": false}}})).await;
    wait_policy(env, name, "every operand to see the new generation", |p| {
        [
            operand::DEVICE_PLUGIN_READY,
            operand::GFD_READY,
            operand::VALIDATOR_READY,
            READY,
        ]
        .iter()
        .all(|t| condition(p, t).is_some_and(|c| c.observed_generation == p.metadata.generation))
    })
    .await;
    wait_settled(env, name, Duration::from_secs(5)).await;
    let after = versions(
        env.daemonsets()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items,
    );
    assert_eq!(after, before, "no DaemonSet rewritten");
    // A no-op server-side apply bumps no resourceVersion, so the audit log is the witness: no
    // DaemonSet request at all, while the status writes of the new generation (the positive
    // control) are there.
    let writes = writes_by(&env.user, changed_at).unwrap();
    let daemonsets: Vec<_> = writes
        .iter()
        .filter(|w| w.resource == "daemonsets")
        .collect();
    assert!(
        daemonsets.is_empty(),
        "a change no operand renders re-applied {daemonsets:?}"
    );
    // Every operand and the ClusterPolicy's overall status acknowledge the change in one request.
    let status_writes: Vec<_> = writes
        .iter()
        .filter(|w| w.resource == "clusterpolicies/status")
        .collect();
    assert_eq!(
        status_writes.len(),
        1,
        "not one status request for the new generation: {writes:?}"
    );
    let mut now = Vec::new();
    for app in apps {
        now.push(pods_of(env, app).await);
    }
    assert_eq!(now, pods, "no operand pod restarted");
    for node in pods[2].keys() {
        mps_capable(env, node, None).await;
    }
}
