//! Upgrades per NVIDIADriver: `a` gets an `upgradePolicy` of its own and a new driver version, so
//! its node goes through NVIDIA's upgrade states and ends on a new driver pod; `b`'s node, whose
//! NVIDIADriver sets no policy and so follows the ClusterPolicy's (`autoUpgrade` off), is never
//! labelled and keeps its driver pod. While a GPU pod that a PodDisruptionBudget protects holds
//! `a`'s node, the ClusterPolicy is `notReady` pointing at `DriverUpgrade` (NVIDIA's upgrade gate),
//! which names the node; the budget relaxed, the upgrade ends. Turning `a`'s `autoUpgrade` off
//! hands its node back.

use std::time::{Duration, Instant};

use gpu_operator_api::{NvidiaDriver, State};
use gpu_operator_harness::{access::kubectl_ok, wait_until};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::{
    Api, ResourceExt as _,
    api::{ListParams, Patch, PatchParams},
};
use serde_json::json;

use crate::support::{Env, TIMEOUT};

const STATE: &str = "nvidia.com/gpu-driver-upgrade-state";
const NEW_IMAGE: &str = "nvcr.io/nvidia/driver:580.95.05";

/// The live driver pod on `node` (any owner's): its uid, image and readiness.
async fn driver_on(env: &Env, node: &str) -> Option<(String, String, bool)> {
    let pods = env
        .pods()
        .list(&ListParams::default().labels("app.kubernetes.io/component=nvidia-driver"))
        .await
        .unwrap();
    pods.items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .find(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
        .map(|p: &Pod| {
            let image = p
                .spec
                .as_ref()
                .and_then(|s| s.containers.first())
                .and_then(|c| c.image.clone())
                .unwrap_or_default();
            let ready = p
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            (p.uid().unwrap_or_default(), image, ready)
        })
}

async fn state(env: &Env, node: &str) -> Option<String> {
    let node = Api::<Node>::all(env.client.clone())
        .get(node)
        .await
        .unwrap();
    node.labels().get(STATE).cloned()
}

async fn patch(env: &Env, name: &str, spec: serde_json::Value) {
    Api::<NvidiaDriver>::all(env.client.clone())
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": spec })),
        )
        .await
        .unwrap();
}

/// Bumps `a`, watches `node_a` upgrade and `node_b` stay; returns `a`'s new pod uid on `node_a`.
pub async fn a_bump_upgrades_only_its_pool(
    env: &Env,
    policy: &str,
    (a, node_a): (&str, &str),
    node_b: &str,
) -> String {
    let (a_before, ..) = driver_on(env, node_a)
        .await
        .expect("a's driver pod on its node");
    let b_before = driver_on(env, node_b)
        .await
        .expect("the driver pod on b's node");
    assert_eq!(state(env, node_a).await, None, "no policy of its own yet");
    let guard = Guard::on(env, node_a).await;
    patch(
        env,
        a,
        json!({"image": NEW_IMAGE, "upgradePolicy": {"maxParallelUpgrades": 1}}),
    )
    .await;
    the_gate_holds(env, policy, node_a).await;
    guard.relax();
    let deadline = Instant::now() + TIMEOUT;
    let mut seen: Vec<String> = Vec::new();
    let a_after = loop {
        if let Some(s) = state(env, node_a).await
            && seen.last() != Some(&s)
        {
            seen.push(s);
        }
        assert_eq!(
            state(env, node_b).await,
            None,
            "b's node follows the ClusterPolicy's policy (autoUpgrade off)"
        );
        let now = driver_on(env, node_a).await;
        if seen.last().map(String::as_str) == Some("upgrade-done")
            && let Some((uid, image, true)) = now.clone()
            && uid != a_before
            && image.starts_with(NEW_IMAGE)
        {
            break uid;
        }
        assert!(
            Instant::now() < deadline,
            "node {node_a} not upgraded: states {seen:?}, driver pod {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(
        seen.iter()
            .any(|s| s != "upgrade-required" && s != "upgrade-done"),
        "{node_a} went through the upgrade states: {seen:?}"
    );
    assert_eq!(
        driver_on(env, node_b).await.map(|(uid, ..)| uid),
        Some(b_before.0),
        "b's driver pod was replaced"
    );
    patch(env, a, json!({"upgradePolicy": {"autoUpgrade": false}})).await;
    wait_until("a's node handed back", TIMEOUT, || async {
        Ok(state(env, node_a).await.is_none().then_some(()))
    })
    .await
    .unwrap();
    a_after
}

/// A GPU pod on a node, in a namespace of its own, that a PodDisruptionBudget keeps there.
struct Guard {
    namespace: String,
}

impl Guard {
    /// Runs the pod on `node` and protects it.
    async fn on(env: &Env, node: &str) -> Self {
        let namespace = gpu_operator_harness::unique_name("gpu-users");
        kubectl_ok(&["create", "namespace", &namespace]).unwrap();
        for object in [
            json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {"name": "guarded", "namespace": namespace},
                "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "guarded"}},
                    "template": {"metadata": {"labels": {"app": "guarded"}}, "spec": {
                        "nodeSelector": {"kubernetes.io/hostname": node},
                        "containers": [{"name": "cuda",
                            "image": "nvcr.io/nvidia/cuda:12.8.1-base-ubuntu24.04",
                            "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}}),
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": {"name": "guarded", "namespace": namespace},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}}}),
        ] {
            let file = std::env::temp_dir().join(gpu_operator_harness::unique_name("guard.json"));
            std::fs::write(&file, object.to_string()).unwrap();
            kubectl_ok(&["apply", "-f", file.to_str().unwrap()]).unwrap();
        }
        let pods: Api<Pod> = Api::namespaced(env.client.clone(), &namespace);
        wait_until("the guarded GPU pod running", TIMEOUT, || async {
            let running = pods
                .list(&ListParams::default())
                .await?
                .items
                .iter()
                .any(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"));
            Ok(running.then_some(()))
        })
        .await
        .unwrap();
        Self { namespace }
    }

    /// Lets the pod be evicted.
    fn relax(&self) {
        kubectl_ok(&[
            "delete",
            "pdb",
            "guarded",
            "-n",
            &self.namespace,
            "--wait=false",
        ])
        .unwrap();
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = kubectl_ok(&["delete", "namespace", &self.namespace, "--wait=false"]);
    }
}

/// While `node`'s upgrade is held, the ClusterPolicy `policy` is `notReady` because of it, and
/// its `DriverUpgrade` names the node and why.
async fn the_gate_holds(env: &Env, policy: &str, node: &str) {
    wait_until(
        "the ClusterPolicy held by the pool's upgrade",
        TIMEOUT,
        || async {
            let live = env.policies().get(policy).await?;
            let status = live.status.unwrap_or_default();
            let said = |type_: &str| {
                status
                    .conditions
                    .iter()
                    .flatten()
                    .find(|c| c.type_ == type_)
                    .map(|c| c.message.clone())
                    .unwrap_or_default()
            };
            let gated = status.state == State::NotReady
                && said("Ready").contains("DriverUpgrade (UpgradeInProgress");
            let named = said("DriverUpgrade").contains(node)
                && said("DriverUpgrade").contains("PodDisruptionBudget");
            Ok((gated && named).then_some(()))
        },
    )
    .await
    .unwrap();
}
