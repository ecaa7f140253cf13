//! A node's resource API switch waits for its GPU workloads: a DRA node relabelled
//! `device-plugin` keeps its kubelet plugin while a pod's claim holds a device there (a Warning
//! `ResourceAPISwitchWaiting` names the claim), and switches once the pod is gone; a device-plugin
//! node relabelled `dra` keeps the device plugin while a pod requests `nvidia.com/gpu` there.
//! Both nodes are put back as they were, their pods and slices with them.

use std::collections::BTreeSet;

use gpu_operator_e2e::scenario::{Env, PLUGIN, TIMEOUT, wait_event};
use gpu_operator_harness::{
    access::kubectl_ok,
    dra::{self, PLUGIN_DAEMONSET},
    fleet::Profile,
    wait_until,
};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::{
    Api, ResourceExt as _,
    api::{DeleteParams, DynamicObject, PostParams},
    core::{ApiResource, GroupVersionKind},
};
use serde_json::json;

use gpu_operator_e2e::dra_scenario::{RESOURCE_API, claim_template, claiming_pod, wait_pods_on};

const DRA_DRIVER_GATE: &str = "nvidia.com/gpu.deploy.dra-driver";
const PLUGIN_GATE: &str = "nvidia.com/gpu.deploy.device-plugin";
const WAITING: &str = "ResourceAPISwitchWaiting";

/// The two switches, on `dra_node` (of `profile`, in `dra_pool`) and on `plugin_node` (in
/// `plugin_pool`); every node is back in its pool at the end, with its slices.
pub async fn switches_wait_for_the_nodes_workloads(
    env: &Env,
    (dra_node, profile): (&str, Profile),
    plugin_node: &str,
    dra_pool: &BTreeSet<String>,
    plugin_pool: &BTreeSet<String>,
) {
    away_from_dra_waits_for_the_claim(env, dra_node).await;
    label(dra_node, "dra");
    wait_gate(env, dra_node, DRA_DRIVER_GATE, Some("true")).await;
    wait_pods_on(env, PLUGIN_DAEMONSET, dra_pool).await;
    let client = dra::plugin_client(&env.client, &env.namespace, dra_node)
        .await
        .unwrap();
    let slice = dra::gpu_slice(dra_node, profile, None, 1).unwrap();
    dra::publish(&client, &slice).await.unwrap();

    to_dra_waits_for_the_gpu_pod(env, plugin_node).await;
    label(plugin_node, "device-plugin");
    wait_gate(env, plugin_node, PLUGIN_GATE, Some("true")).await;
    wait_pods_on(env, PLUGIN, plugin_pool).await;
    wait_pods_on(env, PLUGIN_DAEMONSET, dra_pool).await;
}

/// `dra` → `device-plugin` while a pod's claim holds a device of the node.
async fn away_from_dra_waits_for_the_claim(env: &Env, node: &str) {
    const NAME: &str = "switch-claim";
    let kind = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("resource.k8s.io", "v1", "ResourceClaimTemplate"),
        "resourceclaimtemplates",
    );
    let templates: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.namespace, &kind);
    templates
        .create(
            &PostParams::default(),
            &claim_template(NAME, "gpu.nvidia.com"),
        )
        .await
        .unwrap();
    let mut pod = claiming_pod(NAME, NAME);
    pinned(&mut pod, node);
    env.pods()
        .create(&PostParams::default(), &pod)
        .await
        .unwrap();
    wait_scheduled(env, NAME, node).await;

    label(node, "device-plugin");
    let holder = format!("{}/{NAME}", env.namespace);
    let message = wait_event(env, node, WAITING, &holder)
        .await
        .message
        .unwrap_or_default();
    assert!(message.contains(&format!("(pod {NAME})")), "{message}");
    assert!(message.contains("drain"), "{message}");
    assert_eq!(
        gate(env, node, DRA_DRIVER_GATE).await.as_deref(),
        Some("true"),
        "the kubelet plugin stays while the claim holds a device"
    );
    assert_eq!(gate(env, node, PLUGIN_GATE).await, None, "never both");

    env.pods()
        .delete(NAME, &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    wait_gate(env, node, DRA_DRIVER_GATE, None).await;
    wait_gate(env, node, PLUGIN_GATE, Some("true")).await;
    templates
        .delete(NAME, &DeleteParams::default())
        .await
        .unwrap();
}

/// `device-plugin` → `dra` while a pod requests `nvidia.com/gpu` on the node.
async fn to_dra_waits_for_the_gpu_pod(env: &Env, node: &str) {
    const NAME: &str = "switch-gpu-pod";
    let mut pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": NAME},
        "spec": {"containers": [{
            "name": "cuda", "image": "nvcr.io/nvidia/cuda:12.9.1-base-ubi9",
            "resources": {"limits": {"nvidia.com/gpu": "1"}},
        }]},
    }))
    .unwrap();
    pinned(&mut pod, node);
    env.pods()
        .create(&PostParams::default(), &pod)
        .await
        .unwrap();
    wait_scheduled(env, NAME, node).await;

    label(node, "dra");
    let message = wait_event(env, node, WAITING, &format!("{}/{NAME}", env.namespace))
        .await
        .message
        .unwrap_or_default();
    assert!(message.contains("requesting its GPUs"), "{message}");
    assert_eq!(
        gate(env, node, PLUGIN_GATE).await.as_deref(),
        Some("true"),
        "the device plugin stays while the pod uses a GPU"
    );
    assert_eq!(gate(env, node, DRA_DRIVER_GATE).await, None, "never both");

    env.pods()
        .delete(NAME, &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    wait_gate(env, node, DRA_DRIVER_GATE, Some("true")).await;
    assert_eq!(gate(env, node, PLUGIN_GATE).await, None);
}

/// Places `pod` on `node` through the scheduler (which allocates its claims there).
fn pinned(pod: &mut Pod, node: &str) {
    let spec = pod.spec.get_or_insert_with(Default::default);
    spec.node_selector = Some([("kubernetes.io/hostname".to_owned(), node.to_owned())].into());
}

async fn wait_scheduled(env: &Env, name: &str, node: &str) {
    wait_until(&format!("pod {name} on {node}"), TIMEOUT, || async {
        let pod = env.pods().get(name).await?;
        Ok((pod.spec.and_then(|s| s.node_name).as_deref() == Some(node)).then_some(()))
    })
    .await
    .unwrap();
}

fn label(node: &str, api: &str) {
    kubectl_ok(&[
        "label",
        "node",
        node,
        &format!("{RESOURCE_API}={api}"),
        "--overwrite",
    ])
    .unwrap();
}

async fn gate(env: &Env, node: &str, key: &str) -> Option<String> {
    let nodes: Api<Node> = Api::all(env.client.clone());
    nodes.get(node).await.unwrap().labels().get(key).cloned()
}

/// Waits until `node`'s gate `key` is `value` (`None`: absent).
async fn wait_gate(env: &Env, node: &str, key: &str, value: Option<&str>) {
    let result = wait_until(&format!("{node}: {key}={value:?}"), TIMEOUT, || async {
        Ok((gate(env, node, key).await.as_deref() == value).then_some(()))
    })
    .await;
    if let Err(error) = result {
        panic!("{error}; now {:?}", gate(env, node, key).await);
    }
}
