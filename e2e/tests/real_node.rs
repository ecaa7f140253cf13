//! On the real node of `cargo xtask cluster up --real-node` (a kubelet with containerd and runc):
//! our image and a stand-in for NVIDIA's validator image really run. The validation barrier's
//! init container, exactly as the operator renders it, blocks while its status file is missing
//! on the host and releases once it appears — proven by execution, with each image.
#![cfg(feature = "real-node")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use gpu_operator_e2e::real_node_pods as support;

use std::time::Duration;

use gpu_operator_core::build::barrier;
use gpu_operator_harness::{
    real_node::{NVIDIA_STAND_IN, our_image},
    unique_name,
};
use support::{TestNamespace, container_logs, init_state};

/// A pod whose only init container is the barrier for `component` from `image`, and whose
/// container (same image) prints a line and idles, on the real node.
fn barrier_pod(name: &str, component: &str, image: &str) -> serde_json::Value {
    let mut init = serde_json::to_value(barrier::wait_for(component, image)).unwrap();
    init["imagePullPolicy"] = "Never".into();
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name },
        "spec": {
            "initContainers": [init],
            "containers": [{
                "name": "operand",
                "image": image,
                "imagePullPolicy": "Never",
                "command": ["sh", "-c", "echo operand started; exec sleep 3600"],
            }],
            "volumes": [serde_json::to_value(barrier::volume()).unwrap()],
            "terminationGracePeriodSeconds": 0,
        },
    })
}

async fn barrier_blocks_then_releases(image: &str) {
    let ns = TestNamespace::new("barrier").await;
    // A component name of its own: the status file lives in the host's real validations directory.
    let component = unique_name("e2e");
    let init_name = barrier::wait_for(&component, image).name;
    let ready_file =
        std::path::Path::new(barrier::VALIDATIONS_DIR).join(format!("{component}-ready"));
    let _ = std::fs::remove_file(&ready_file);
    let pod = ns
        .create_pod(barrier_pod("barrier", &component, image))
        .await;

    // Blocks: the init container runs and loops, saying what it waits for, at least twice.
    let waiting = format!("waiting for the {component} validation on this node");
    ns.wait(
        "the barrier to loop twice",
        Duration::from_secs(120),
        || async {
            let logs = container_logs(&ns.name, &pod, &init_name);
            Ok((logs.matches(&waiting).count() >= 2).then_some(()))
        },
    )
    .await;
    let state = init_state(&ns.client, &ns.name, &pod).await;
    assert!(
        state["running"].is_object(),
        "the barrier is not running: {state}"
    );

    // Releases: the validator's status file appears on the host.
    std::fs::create_dir_all(barrier::VALIDATIONS_DIR).unwrap();
    std::fs::write(&ready_file, b"").unwrap();
    ns.wait(
        "the barrier to exit and the operand to start",
        Duration::from_secs(60),
        || async {
            let logs = container_logs(&ns.name, &pod, "operand");
            Ok(logs.contains("operand started").then_some(()))
        },
    )
    .await;
    std::fs::remove_file(&ready_file).unwrap();
    let state = init_state(&ns.client, &ns.name, &pod).await;
    assert_eq!(state["terminated"]["exitCode"], 0, "{state}");
    let logs = container_logs(&ns.name, &pod, &init_name);
    assert!(
        logs.ends_with(&format!("{component} validation found\n")),
        "{logs}"
    );
    ns.delete().await;
}

#[tokio::test]
async fn the_barrier_blocks_and_releases_with_our_image() {
    barrier_blocks_then_releases(&our_image()).await;
}

#[tokio::test]
async fn the_barrier_blocks_and_releases_with_a_stand_in_for_nvidias_validator_image() {
    barrier_blocks_then_releases(NVIDIA_STAND_IN).await;
}
