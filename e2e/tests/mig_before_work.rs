//! MIG before work (NVIDIA/gpu-operator#2670), with the operator as a host process on the kwok
//! fleet: an H100 node created already asking for a MIG layout (`nvidia.com/mig.config`, as an
//! autoscaler's node template sets it) gets no device plugin, GFD or other GPU-client deploy
//! label and no plugin pod while the MIG manager's `nvidia.com/mig.config.state` is absent or
//! `pending`, and says why in an Event on the node; once a stand-in for NVIDIA's MIG manager
//! writes `success`, the labels come in one patch and the plugin pod follows. Positive control:
//! the same node asking for `all-disabled` gets them all at once. A node asking for a layout the
//! MIG manager's configuration lacks gets one Warning Event naming the label and the closest
//! valid names, and no more however long it waits.
//!
//! No MIG manager runs on kwok, so the stand-in writes the state label as NVIDIA's does (its own
//! field manager, a merge patch of the label). It writes only the state, as mig-parted's shell
//! `reconfigure` did for deploy labels it found absent; the Go one of today also writes `true`
//! to them first, which the labeller then leaves alone.
#![cfg(feature = "e2e")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::large_futures
)]

use std::collections::BTreeMap;

use futures::{StreamExt as _, TryStreamExt as _};
use gpu_operator_api::{ClusterPolicy, ClusterPolicySpec};
use gpu_operator_e2e::scenario::{
    Cleanup, Env, IMAGES, PLUGIN, TIMEOUT, pods_of, setup, wait_ds_ready, wait_event,
};
use gpu_operator_harness::{access::kubectl_ok, fleet::Profile, unique_name, wait_until};
use k8s_openapi::api::core::v1::{Event, Node};
use kube::{
    Api, ResourceExt as _,
    api::{ListParams, PostParams},
    runtime::{WatchStreamExt as _, watcher},
};

const GFD: &str = "gpu-feature-discovery";
const MIG_CONFIG: &str = "nvidia.com/mig.config";
const MIG_STATE: &str = "nvidia.com/mig.config.state";
/// The deploy labels NVIDIA's MIG manager pauses (mig-parted `pkg/mig/reconfigure`) that the
/// operator writes: written out here, not taken from the code under test.
const GPU_CLIENTS: [&str; 5] = [
    "nvidia.com/gpu.deploy.device-plugin",
    "nvidia.com/gpu.deploy.gpu-feature-discovery",
    "nvidia.com/gpu.deploy.dcgm-exporter",
    "nvidia.com/gpu.deploy.dcgm",
    "nvidia.com/gpu.deploy.client",
];

/// Deletes the nodes the test created, also when a step panics.
struct NodeCleanup(Vec<String>);

impl Drop for NodeCleanup {
    fn drop(&mut self) {
        for node in &self.0 {
            let _ = kubectl_ok(&["delete", "node", node, "--ignore-not-found", "--wait=false"]);
        }
    }
}

#[tokio::test]
async fn a_node_created_with_a_mig_layout_gets_its_gpu_clients_once_the_layout_is_applied() {
    let env = setup().await;
    let operator = env.start(&IMAGES);
    let name = unique_name("cluster-policy");
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
    wait_ds_ready(&env, PLUGIN, None).await;

    let control = unique_name("mig-disabled");
    let waiting = unique_name("mig-1g");
    let typo = unique_name("mig-typo");
    let _nodes = NodeCleanup(vec![control.clone(), waiting.clone(), typo.clone()]);
    create_node(&env, &control, "all-disabled").await;
    create_node(&env, &waiting, "all-1g.10gb").await;
    create_node(&env, &typo, "all-1g.10GB").await;

    // Positive control: the default layout waits for nothing.
    wait_until(
        "the all-disabled node's GPU client gates",
        TIMEOUT,
        || async {
            let labels = labels(&env, &control).await;
            Ok(GPU_CLIENTS
                .iter()
                .all(|k| labels.get(*k).is_some_and(|v| v == "true"))
                .then_some(()))
        },
    )
    .await
    .unwrap();
    wait_ds_ready(&env, PLUGIN, Some(&control)).await;
    wait_ds_ready(&env, GFD, Some(&control)).await;

    // The node asking for a MIG layout: labelled (the marker: the gates come in one patch, so a
    // gate not held back would be there with the driver's), but no GPU client, and an Event.
    wait_until("the MIG node's first labels", TIMEOUT, || async {
        let labels = labels(&env, &waiting).await;
        Ok(labels
            .get("nvidia.com/gpu.deploy.driver")
            .is_some_and(|v| v == "true")
            .then_some(()))
    })
    .await
    .unwrap();
    assert_waiting(&env, &waiting).await;
    node_event(&env, &waiting, "is not set").await;

    // The stand-in MIG manager starts: `pending`.
    stand_in_sets_state(&waiting, "pending");
    node_event(&env, &waiting, "is pending").await;
    assert_waiting(&env, &waiting).await;

    // The stand-in applied the layout: every GPU client gate comes in one patch.
    let nodes: Api<Node> = Api::all(env.client.clone());
    let config = watcher::Config::default().fields(&format!("metadata.name={waiting}"));
    let mut versions = watcher(nodes, config).applied_objects().boxed();
    let before = versions.try_next().await.unwrap().unwrap();
    assert!(held_gates(before.labels()).is_empty());
    stand_in_sets_state(&waiting, "success");
    let first = tokio::time::timeout(TIMEOUT, async {
        loop {
            let node = versions.try_next().await.unwrap().unwrap();
            let gates = held_gates(node.labels());
            if !gates.is_empty() {
                return gates
                    .into_iter()
                    .map(|(k, v)| (k, v.to_owned()))
                    .collect::<BTreeMap<&str, String>>();
            }
        }
    })
    .await
    .expect("the GPU client gates after success");
    let all_true: BTreeMap<&str, String> = GPU_CLIENTS
        .iter()
        .map(|k| (*k, "true".to_owned()))
        .collect();
    assert_eq!(
        first, all_true,
        "the first node version with any gate has them all"
    );
    wait_ds_ready(&env, PLUGIN, Some(&waiting)).await;
    wait_ds_ready(&env, GFD, Some(&waiting)).await;

    // The layout with a typo: said once, by name, all along the steps above.
    let not_found = wait_until("the typo's Warning Event", TIMEOUT, || async {
        let events = node_events(&env, &typo, "MIGConfigNotFound").await;
        Ok((!events.is_empty()).then_some(events))
    })
    .await
    .unwrap();
    assert_eq!(not_found.len(), 1, "one Event, no loop: {not_found:#?}");
    let message = not_found[0].message.clone().unwrap_or_default();
    for part in [
        typo.as_str(),
        "nvidia.com/mig.config=all-1g.10GB",
        "all-1g.10gb",
    ] {
        assert!(message.contains(part), "{part} in {message}");
    }
    assert_waiting(&env, &typo).await;
    operator.stop().unwrap();
}

/// The Events with `reason` about `node`.
async fn node_events(env: &Env, node: &str, reason: &str) -> Vec<Event> {
    let selector = format!("involvedObject.name={node},reason={reason}");
    Api::<Event>::all(env.client.clone())
        .list(&ListParams::default().fields(&selector))
        .await
        .unwrap()
        .items
}

/// Creates a kwok H100 node (MIG-capable) already labelled `nvidia.com/mig.config=layout`.
async fn create_node(env: &Env, name: &str, layout: &str) {
    let mut node = Profile::H100.node(name);
    node.metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(MIG_CONFIG.to_owned(), layout.to_owned());
    Api::<Node>::all(env.client.clone())
        .create(&PostParams::default(), &node)
        .await
        .unwrap();
}

async fn labels(env: &Env, node: &str) -> BTreeMap<String, String> {
    Api::<Node>::all(env.client.clone())
        .get(node)
        .await
        .unwrap()
        .labels()
        .clone()
}

/// The GPU client gates on a node, by key.
fn held_gates(labels: &BTreeMap<String, String>) -> BTreeMap<&'static str, &str> {
    GPU_CLIENTS
        .iter()
        .filter_map(|k| labels.get(*k).map(|v| (*k, v.as_str())))
        .collect()
}

/// The node is labelled by the operator, but has no GPU client gate and no plugin or GFD pod.
async fn assert_waiting(env: &Env, node: &str) {
    let labels = labels(env, node).await;
    for labelled in [
        "nvidia.com/gpu.present",
        "nvidia.com/gpu.deploy.driver",
        "nvidia.com/gpu.deploy.mig-manager",
    ] {
        assert_eq!(
            labels.get(labelled).map(String::as_str),
            Some("true"),
            "{labelled}"
        );
    }
    assert_eq!(held_gates(&labels), BTreeMap::new(), "while waiting");
    for daemonset in [PLUGIN, GFD] {
        assert!(
            !pods_of(env, daemonset).await.contains_key(node),
            "a {daemonset} pod on {node} before its MIG layout"
        );
    }
}

/// What NVIDIA's MIG manager does to report progress: a label patch under its field manager.
fn stand_in_sets_state(node: &str, state: &str) {
    kubectl_ok(&[
        "label",
        "node",
        node,
        "--overwrite",
        "--field-manager=nvidia-mig-manager",
        &format!("{MIG_STATE}={state}"),
    ])
    .unwrap();
}

/// Waits for the operator's `WaitingForMIGLayout` Event about `node` whose message has `state`
/// in it, and checks it names the node and the layout.
async fn node_event(env: &Env, node: &str, state: &str) {
    let event = wait_event(env, node, "WaitingForMIGLayout", state).await;
    let message = event.message.unwrap_or_default();
    assert!(
        message.contains(node) && message.contains("all-1g.10gb") && message.contains("success"),
        "{message}"
    );
}
