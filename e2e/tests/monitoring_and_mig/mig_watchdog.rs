//! The MIG watchdog end to end: a stand-in plays NVIDIA's MIG manager on one MIG-capable node
//! (it asks for a layout, pauses the GPU operands, then reports `failed`, as k8s-mig-manager's
//! reconfigure script writes its labels); `MIGManagerReady` turns False naming the node and the
//! layout, a `MIGConfigFailed` Warning Event and `gpu_operator_mig_config_failed_nodes` say the
//! same, and all of it clears once the stand-in reports `success` and restores the labels. Then
//! the watchdog's timeout and its recoveries (see
//! [`a_stuck_or_failed_layout_is_recovered_as_the_policy_says`]).

use std::collections::BTreeMap;

use gpu_operator_api::{conditions::operand, labels};
use gpu_operator_harness::{access::kubectl_ok, operator::Operator, wait_until};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
};
use serde_json::json;

use super::{
    support::{Env, TIMEOUT, condition, get, simulated_nodes, wait_event, wait_policy},
    warning_event,
};

/// The deploy label NVIDIA's MIG manager pauses first.
const PLUGIN_DEPLOY: &str = "nvidia.com/gpu.deploy.device-plugin";
/// The layout the stand-in asks for.
const LAYOUT: &str = "all-1g.10gb";

/// Sets (`Some`) or removes (`None`) labels of `node` as the MIG manager would.
fn label(node: &str, changes: &[(&str, Option<&str>)]) {
    let mut args = vec![
        "label".to_owned(),
        "node".to_owned(),
        node.to_owned(),
        "--overwrite".to_owned(),
    ];
    for (key, value) in changes {
        args.push(match value {
            Some(v) => format!("{key}={v}"),
            None => format!("{key}-"),
        });
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    kubectl_ok(&args).unwrap();
}

/// The operator's `gpu_operator_mig_config_failed_nodes` sample.
async fn failed_gauge(operator: &Operator) -> Option<String> {
    let text = get(&format!(
        "http://127.0.0.1:{}/metrics",
        operator.metrics_port
    ))
    .await?;
    text.lines()
        .find(|l| l.starts_with("gpu_operator_mig_config_failed_nodes "))
        .map(|l| l.rsplit(' ').next().unwrap_or_default().to_owned())
}

async fn wait_gauge(operator: &Operator, value: &str) {
    wait_until(
        &format!("the failed-nodes gauge at {value}"),
        TIMEOUT,
        || async { Ok((failed_gauge(operator).await.as_deref() == Some(value)).then_some(())) },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", operator.log_tail()));
}

pub async fn a_failed_mig_layout_is_reported_until_it_applies(
    env: &Env,
    name: &str,
    operator: &Operator,
) {
    let nodes = simulated_nodes(&env.client).await;
    let node = nodes
        .iter()
        .filter(|n| {
            n.labels()
                .get(labels::MIG_CAPABLE)
                .is_some_and(|v| v == "true")
        })
        .map(ResourceExt::name_any)
        .min()
        .unwrap();
    let before: BTreeMap<String, String> = nodes
        .iter()
        .find(|n| n.name_any() == node)
        .unwrap()
        .labels()
        .clone();
    let ready = |p: &gpu_operator_api::ClusterPolicy| {
        condition(p, operand::MIG_MANAGER_READY).is_some_and(|c| c.status == "True")
    };
    // The positive control: ready before the failure.
    wait_policy(env, name, "MIGManagerReady before the failure", ready).await;
    wait_gauge(operator, "0").await;

    label(
        &node,
        &[
            (labels::MIG_CONFIG, Some(LAYOUT)),
            (labels::MIG_CONFIG_STATE, Some("pending")),
            (PLUGIN_DEPLOY, Some("paused-for-mig-change")),
        ],
    );
    label(&node, &[(labels::MIG_CONFIG_STATE, Some("failed"))]);
    let policy = wait_policy(
        env,
        name,
        "MIGManagerReady to name the failed layout",
        |p| {
            condition(p, operand::MIG_MANAGER_READY)
                .is_some_and(|c| c.status == "False" && c.message.contains(&node))
        },
    )
    .await;
    let message = &condition(&policy, operand::MIG_MANAGER_READY)
        .unwrap()
        .message;
    assert!(
        message.contains(&format!("layout \"{LAYOUT}\" failed on 1 node(s) ({node})"))
            && message.contains("paused-for-mig-change"),
        "{message}"
    );
    warning_event(env, name, "MIGConfigFailed", &node).await;
    wait_gauge(operator, "1").await;

    // The MIG manager applies the layout after all and restores what it paused.
    label(
        &node,
        &[
            (labels::MIG_CONFIG_STATE, Some("success")),
            (PLUGIN_DEPLOY, Some("true")),
        ],
    );
    wait_policy(env, name, "MIGManagerReady once the layout applied", ready).await;
    wait_gauge(operator, "0").await;
    let restore: Vec<(&str, Option<&str>)> =
        [labels::MIG_CONFIG, labels::MIG_CONFIG_STATE, PLUGIN_DEPLOY]
            .into_iter()
            .map(|key| (key, before.get(key).map(String::as_str)))
            .collect();
    label(&node, &restore);
}

/// The UID of the MIG manager pod on `node`, once there is one.
async fn mig_manager_pod(env: &Env, node: &str) -> String {
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &env.namespace);
    let params = ListParams::default()
        .labels("app=nvidia-mig-manager")
        .fields(&format!("spec.nodeName={node}"));
    wait_until(&format!("a MIG manager pod on {node}"), TIMEOUT, || async {
        let list = pods.list(&params).await?;
        Ok(list
            .items
            .into_iter()
            .find(|p| p.metadata.deletion_timestamp.is_none())
            .and_then(|p| p.metadata.uid))
    })
    .await
    .unwrap()
}

/// The node's labels now.
async fn labels_of(env: &Env, node: &str) -> BTreeMap<String, String> {
    Api::<Node>::all(env.client.clone())
        .get(node)
        .await
        .unwrap()
        .labels()
        .clone()
}

/// Sets `migManager.watchdog` of the policy.
async fn watchdog(env: &Env, name: &str, watchdog: serde_json::Value) {
    let patch = json!({"spec": {"migManager": {"watchdog": watchdog}}});
    env.policies()
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// The MIG watchdog's timeout and recoveries: a node `pending` past `timeoutSeconds` is marked
/// stuck and named in `MIGManagerReady`, with a `MIGConfigStuck` Event on the node; under
/// `report` its paused operand stays paused (the positive control), under `restoreClients` it is
/// set back to `true`; under `retry` a failed layout restarts the node's MIG manager pod, but not
/// while a pod on the node requests a GPU (`MIGRetryHeld` names it), and only once per layout.
pub async fn a_stuck_or_failed_layout_is_recovered_as_the_policy_says(env: &Env, name: &str) {
    let node = simulated_nodes(&env.client)
        .await
        .iter()
        .filter(|n| {
            n.labels()
                .get(labels::MIG_CAPABLE)
                .is_some_and(|v| v == "true")
        })
        .map(ResourceExt::name_any)
        .min()
        .unwrap();
    let before = labels_of(env, &node).await;
    a_stuck_node_is_marked_and_its_clients_restored_on_request(env, name, &node).await;
    a_failed_layout_is_retried_unless_gpu_pods_run(env, name, &node).await;
    watchdog(env, name, serde_json::Value::Null).await;
    let restore: Vec<(&str, Option<&str>)> =
        [labels::MIG_CONFIG, labels::MIG_CONFIG_STATE, PLUGIN_DEPLOY]
            .into_iter()
            .map(|key| (key, before.get(key).map(String::as_str)))
            .collect();
    label(&node, &restore);
}

/// `pending` past the timeout: marked and named; under `report` the pause stays (the control),
/// under `restoreClients` it goes; moving on clears it all.
async fn a_stuck_node_is_marked_and_its_clients_restored_on_request(
    env: &Env,
    name: &str,
    node: &str,
) {
    let node = node.to_owned();
    watchdog(
        env,
        name,
        json!({"timeoutSeconds": 3, "recovery": "report"}),
    )
    .await;
    label(
        &node,
        &[
            (labels::MIG_CONFIG, Some(LAYOUT)),
            (labels::MIG_CONFIG_STATE, Some("pending")),
            (PLUGIN_DEPLOY, Some(labels::PAUSED_FOR_MIG_CHANGE)),
        ],
    );
    let policy = wait_policy(env, name, "MIGManagerReady to name the stuck node", |p| {
        condition(p, operand::MIG_MANAGER_READY)
            .is_some_and(|c| c.status == "False" && c.message.contains("stuck on"))
    })
    .await;
    let message = &condition(&policy, operand::MIG_MANAGER_READY)
        .unwrap()
        .message;
    assert!(
        message.contains(&format!("layout \"{LAYOUT}\" stuck on 1 node(s) ({node})")),
        "{message}"
    );
    let marked = labels_of(env, &node).await;
    assert_eq!(
        marked.get(labels::MIG_STUCK).map(String::as_str),
        Some("pending")
    );
    assert_eq!(
        marked.get(PLUGIN_DEPLOY).map(String::as_str),
        Some(labels::PAUSED_FOR_MIG_CHANGE),
        "report only leaves the pause"
    );
    wait_event(
        env,
        &node,
        "MIGConfigStuck",
        "past migManager.watchdog.timeoutSeconds",
    )
    .await;

    // restoreClients: the paused operand comes back.
    watchdog(env, name, json!({"recovery": "restoreClients"})).await;
    wait_until(
        "the paused device plugin label restored",
        TIMEOUT,
        || async {
            let now = labels_of(env, &node).await;
            Ok((now.get(PLUGIN_DEPLOY).map(String::as_str) == Some("true")).then_some(()))
        },
    )
    .await
    .unwrap();

    // The MIG manager moves on: the mark goes, the condition clears.
    label(&node, &[(labels::MIG_CONFIG_STATE, Some("success"))]);
    wait_policy(env, name, "MIGManagerReady once the node moved on", |p| {
        condition(p, operand::MIG_MANAGER_READY).is_some_and(|c| c.status == "True")
    })
    .await;
    assert_eq!(labels_of(env, &node).await.get(labels::MIG_STUCK), None);
}

/// `retry`: held while a pod on the node requests a GPU (named in `MIGRetryHeld`, the MIG manager
/// pod kept), done once it is gone (the pod replaced).
async fn a_failed_layout_is_retried_unless_gpu_pods_run(env: &Env, name: &str, node: &str) {
    let node = node.to_owned();
    watchdog(env, name, json!({"recovery": "retry"})).await;
    let manager = mig_manager_pod(env, &node).await;
    let gpu_pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "mig-watchdog-gpu-user", "namespace": env.namespace},
        "spec": {
            "nodeName": node,
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "cuda", "image": "cuda",
                "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
        },
    }))
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &env.namespace);
    pods.create(&PostParams::default(), &gpu_pod).await.unwrap();
    label(&node, &[(labels::MIG_CONFIG_STATE, Some("failed"))]);
    wait_event(env, &node, "MIGRetryHeld", "mig-watchdog-gpu-user").await;
    assert_eq!(
        mig_manager_pod(env, &node).await,
        manager,
        "held: not restarted"
    );

    // Without GPU pods (after a success resets the once-per-layout), the retry restarts it.
    pods.delete(
        "mig-watchdog-gpu-user",
        &DeleteParams::default().grace_period(0),
    )
    .await
    .unwrap();
    wait_until("the GPU pod to go", TIMEOUT, || async {
        Ok(pods
            .get_opt("mig-watchdog-gpu-user")
            .await?
            .is_none()
            .then_some(()))
    })
    .await
    .unwrap();
    label(&node, &[(labels::MIG_CONFIG_STATE, Some("success"))]);
    wait_policy(env, name, "MIGManagerReady after the success", |p| {
        condition(p, operand::MIG_MANAGER_READY).is_some_and(|c| c.status == "True")
    })
    .await;
    label(&node, &[(labels::MIG_CONFIG_STATE, Some("failed"))]);
    wait_event(
        env,
        &node,
        "MIGConfigRetried",
        "restarted the node's MIG manager",
    )
    .await;
    wait_until("a new MIG manager pod", TIMEOUT, || async {
        Ok((mig_manager_pod(env, &node).await != manager).then_some(()))
    })
    .await
    .unwrap();
}
