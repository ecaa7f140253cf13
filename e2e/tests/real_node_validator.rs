//! On the real node (`cargo xtask cluster up --real-node`), labelled as a GPU node but with no
//! GPU and no driver: the operator (a host process) deploys the validator DaemonSet from our
//! image; its pod starts under the real kubelet, its `driver-validation` init container runs our
//! validator, which finds no driver and says so — in a Node condition and, summed up by the
//! operator, in the ClusterPolicy's `NodesValidated` naming this node. The node status exporter's
//! pod answers `/metrics` from inside the pod with NVIDIA's `gpu_operator_node_*` gauges.
#![cfg(feature = "real-node")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use gpu_operator_e2e::real_node_pods as support;

use std::time::Duration;

use gpu_operator_api::{conditions::node as cond, validator::reason};
use gpu_operator_harness::{
    crd::ensure_crd,
    kubectl,
    real_node::{NODE_NAME, TAINT},
};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::{Api, api::ListParams};
use serde_json::json;
use support::{TestNamespace, label_gpu_node};

/// The running pod of a DaemonSet (by its `app` label) on the real node.
async fn pod_on_real_node(pods: &Api<Pod>, app: &str) -> Option<Pod> {
    let list = pods
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .ok()?;
    list.items
        .into_iter()
        .find(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(NODE_NAME))
}

#[tokio::test]
#[allow(clippy::too_many_lines, reason = "one scenario, step by step")]
async fn the_validator_pod_reports_no_driver_and_the_exporter_answers_on_the_real_node() {
    ensure_crd().await.unwrap();
    let ns = TestNamespace::new("gpu-operator-real").await;
    let client = ns.client.clone();
    let (operator, _) = ns.start_operator().await;
    ns.create_policy(|spec| {
        spec["daemonsets"]["tolerations"] = json!([{"key": TAINT.0, "operator": "Exists"}]);
        // A preinstalled driver is expected (there is none); no toolkit to install.
        spec["driver"]["enabled"] = false.into();
        spec["toolkit"]["enabled"] = false.into();
        spec["validator"] = support::our_image_section();
        spec["nodeStatusExporter"] = support::our_image_section();
        spec["nodeStatusExporter"]["enabled"] = true.into();
    })
    .await;
    let nodes: Api<Node> = Api::all(client.clone());
    label_gpu_node(&nodes, Some("true")).await;

    // The validator's pod starts on the real node, and its driver check really runs.
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    let expected_reason = reason::DRIVER_NOT_FOUND;
    let condition = ns
        .wait(
            "the real node's GPUDriverReady condition",
            Duration::from_secs(240),
            || async {
                let node = nodes.get(NODE_NAME).await?;
                let found = node
                    .status
                    .and_then(|s| s.conditions)
                    .unwrap_or_default()
                    .into_iter()
                    .find(|c| c.type_ == cond::GPU_DRIVER_READY && c.status == "False");
                Ok(found)
            },
        )
        .await;
    assert_eq!(
        condition.reason.as_deref(),
        Some(expected_reason),
        "{condition:?}"
    );
    let validator = pod_on_real_node(&pods, "nvidia-operator-validator")
        .await
        .unwrap();
    let validator_name = validator.metadata.name.clone().unwrap();
    let logs = kubectl()
        .args([
            "logs",
            "-n",
            &ns.name,
            &validator_name,
            "-c",
            "driver-validation",
        ])
        .output()
        .unwrap();
    let logs = String::from_utf8_lossy(&logs.stdout).into_owned();
    assert!(!logs.is_empty(), "the driver check printed nothing");

    // The operator names the node and the reason in the ClusterPolicy.
    let named = format!("{NODE_NAME} (driver: {expected_reason})");
    let message = ns.nodes_validated(&ns.name, &named).await;
    assert!(message.contains(&named), "{message}");

    // The node status exporter answers from inside its pod, with NVIDIA's gauges.
    let metrics = ns
        .wait(
            "the node status exporter's /metrics",
            Duration::from_secs(180),
            || async {
                let Some(pod) = pod_on_real_node(&pods, "nvidia-node-status-exporter").await else {
                    return Ok(None);
                };
                let output = kubectl()
                    .args(["exec", "-n", &ns.name, &pod.metadata.name.unwrap(), "--"])
                    .args(["busybox", "wget", "-qO-", "http://127.0.0.1:8000/metrics"])
                    .output()?;
                let text = String::from_utf8_lossy(&output.stdout).into_owned();
                Ok(text
                    .contains("gpu_operator_node_driver_ready")
                    .then_some(text))
            },
        )
        .await;
    let driver_ready = format!("gpu_operator_node_driver_ready{{node=\"{NODE_NAME}\"}} 0");
    assert!(metrics.contains(&driver_ready), "{metrics}");

    // Nothing crash-loops without saying why: no container of the validator restarted.
    let validator = pods.get(&validator_name).await.unwrap();
    let restarts: i32 = validator
        .status
        .and_then(|s| s.container_statuses)
        .unwrap_or_default()
        .iter()
        .map(|c| c.restart_count)
        .sum();
    assert_eq!(restarts, 0, "{}", ns.describe());

    label_gpu_node(&nodes, None).await;
    ns.finish(operator).await;
}
