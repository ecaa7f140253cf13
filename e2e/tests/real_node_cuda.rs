//! The CUDA check's workload pod really runs on the real node (`cargo xtask cluster up
//! --real-node`): the validator's `cuda` component, run with the environment the operator renders
//! on the validator DaemonSet's `cuda-validation` container, creates its workload pod from our
//! image; the real kubelet starts our `vectorAdd` in it, which finds no driver library on this
//! GPU-less node and fails with its own exit code; the validator reports that on the Node
//! (`GPUCudaReady=False/WorkloadFailed` with the workload's own words, so `GPUStackReady` is
//! `CUDANotReady`) and the operator names the node in the ClusterPolicy's `NodesValidated`. A `vectorAdd` missing from the image fails this
//! test (the container cannot start: no exit code 2, no library message).
#![cfg(feature = "real-node")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::{process::Command, time::Duration};

use gpu_operator_api::{conditions::node as cond, validator::reason};
use gpu_operator_e2e::real_node_pods::{TestNamespace, label_gpu_node, our_image_section};
use gpu_operator_harness::{
    crd::ensure_crd,
    operator::workspace_binary,
    real_node::{NODE_NAME, our_image},
};
use k8s_openapi::api::{
    apps::v1::DaemonSet,
    core::v1::{Node, Pod},
};
use kube::{
    Api,
    api::{ListParams, Patch, PatchParams},
};
use serde_json::{Value, json};

/// The exit code `vectorAdd --help` documents for a driver library that cannot be loaded.
const NO_LIBRARY: i32 = 2;

/// Removes the validators' Node conditions and summary a test before this one left on the real
/// node, so that this node starts as a fresh one.
async fn forget_validation(nodes: &Api<Node>) {
    let conditions: Vec<Value> = [
        cond::GPU_DRIVER_READY,
        cond::GPU_TOOLKIT_READY,
        cond::GPU_CUDA_READY,
        cond::GPU_DEVICE_PLUGIN_READY,
        cond::GPU_STACK_READY,
    ]
    .iter()
    .map(|t| json!({"type": t, "$patch": "delete"}))
    .collect();
    nodes
        .patch_status(
            NODE_NAME,
            &PatchParams::default(),
            &Patch::Strategic(json!({"status": {"conditions": conditions}})),
        )
        .await
        .unwrap();
    let annotation = gpu_operator_api::node_validation::ANNOTATION;
    let patch = json!({"metadata": {"annotations": {annotation: null}}});
    nodes
        .patch(NODE_NAME, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// The literal environment of the validator DaemonSet's `cuda-validation` init container.
fn cuda_validation_env(validator: &DaemonSet) -> Vec<(String, String)> {
    let pod = validator
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap();
    let container = pod
        .init_containers
        .iter()
        .flatten()
        .find(|c| c.name == "cuda-validation")
        .expect("the validator DaemonSet has a cuda-validation init container");
    container
        .env
        .iter()
        .flatten()
        .filter_map(|v| v.value.clone().map(|value| (v.name.clone(), value)))
        .collect()
}

#[tokio::test]
#[allow(clippy::too_many_lines, reason = "one scenario, step by step")]
async fn the_cuda_workload_pod_runs_our_vector_add_and_fails_truthfully_on_a_node_without_a_driver()
{
    ensure_crd().await.unwrap();
    let ns = TestNamespace::new("gpu-operator-cuda").await;
    let client = ns.client.clone();
    let (operator, dir) = ns.start_operator().await;
    let image = our_image();

    // Our image as the validator image. No toleration of the real node's taint: no operand pod
    // runs there, so its Node conditions are this test's alone.
    ns.create_policy(|spec| spec["validator"] = our_image_section())
        .await;
    let nodes: Api<Node> = Api::all(client.clone());
    forget_validation(&nodes).await;
    label_gpu_node(&nodes, Some("true")).await;

    // The validator's settings as the operator rendered them.
    let daemonsets: Api<DaemonSet> = Api::namespaced(client.clone(), &ns.name);
    let validator = ns
        .wait(
            "the validator DaemonSet",
            Duration::from_secs(120),
            || async { Ok(daemonsets.get_opt("nvidia-operator-validator").await?) },
        )
        .await;
    let rendered = cuda_validation_env(&validator);
    let rendered_image = rendered
        .iter()
        .find(|(k, _)| k == "VALIDATOR_IMAGE")
        .map(|(_, v)| v.clone());
    assert_eq!(
        rendered_image.as_deref(),
        Some(image.as_str()),
        "{rendered:?}"
    );

    // The `cuda` component on the real node's behalf, as its init container would run it. The
    // node has no NVIDIA runtime, so the runtime class (which would mount the driver) is left out.
    let output_dir = dir.join("validations");
    let mut check = Command::new(workspace_binary("gpu-operator-validator"));
    check
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("KUBECONFIG", std::env::var_os("KUBECONFIG").unwrap())
        .envs(
            rendered
                .iter()
                .filter(|(k, _)| k != "VALIDATOR_RUNTIME_CLASS")
                .map(|(k, v)| (k, v)),
        )
        .env("COMPONENT", "cuda")
        .env("WITH_WAIT", "false")
        .env("NODE_NAME", NODE_NAME)
        .env("OPERATOR_NAMESPACE", &ns.name)
        .env("OUTPUT_DIR", &output_dir)
        .env("WORKLOAD_TIMEOUT_SECONDS", "180");
    let output = tokio::task::spawn_blocking(move || check.output())
        .await
        .unwrap()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(1), "the check failed: {stderr}");
    assert!(!output_dir.join("cuda-ready").exists());

    // The workload pod really ran our vectorAdd under the real kubelet.
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    let workload = pods
        .list(&ListParams::default().labels("app=nvidia-cuda-validator"))
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(NODE_NAME))
        .unwrap_or_else(|| panic!("no CUDA workload pod on {NODE_NAME}: {stderr}"));
    let container = workload.spec.as_ref().unwrap().containers[0].clone();
    assert_eq!(container.image.as_deref(), Some(image.as_str()));
    assert_eq!(container.command.unwrap_or_default(), ["vectorAdd"]);
    let terminated = workload
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first())
        .and_then(|c| c.state.as_ref())
        .and_then(|s| s.terminated.clone())
        .unwrap_or_else(|| panic!("the workload container did not run: {}", ns.describe()));
    assert_eq!(terminated.exit_code, NO_LIBRARY, "{terminated:?}");
    let said = terminated.message.unwrap_or_default();
    assert!(said.contains("libcuda.so.1"), "{said}");

    // The Node says why, in the workload's own words.
    let conditions = nodes
        .get(NODE_NAME)
        .await
        .unwrap()
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default();
    let of = |type_: &str| {
        gpu_operator_e2e::validator_host::condition(&conditions, type_)
            .cloned()
            .unwrap_or_else(|| panic!("no {type_} on {NODE_NAME}: {conditions:#?}"))
    };
    let cuda = of(cond::GPU_CUDA_READY);
    assert_eq!(
        (cuda.status.as_str(), cuda.reason.as_deref()),
        ("False", Some(reason::WORKLOAD_FAILED)),
        "{cuda:?}"
    );
    let message = cuda.message.unwrap_or_default();
    assert!(message.contains("exited 2"), "{message}");
    assert!(message.contains("libcuda.so.1"), "{message}");
    let stack = of(cond::GPU_STACK_READY);
    assert_eq!(
        (stack.status.as_str(), stack.reason.as_deref()),
        ("False", Some(reason::CUDA_NOT_READY)),
        "{stack:?}"
    );

    // The operator names the node and why in the ClusterPolicy.
    let named = format!("{NODE_NAME} (cuda: {})", reason::WORKLOAD_FAILED);
    let summary = ns.nodes_validated(&ns.name, &named).await;
    assert!(summary.contains(&named), "{summary}");

    forget_validation(&nodes).await;
    label_gpu_node(&nodes, None).await;
    ns.finish(operator).await;
}
