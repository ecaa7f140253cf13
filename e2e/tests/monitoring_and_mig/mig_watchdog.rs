//! The MIG watchdog end to end: a stand-in plays NVIDIA's MIG manager on one MIG-capable node
//! (it asks for a layout, pauses the GPU operands, then reports `failed`, as k8s-mig-manager's
//! reconfigure script writes its labels); `MIGManagerReady` turns False naming the node and the
//! layout, a `MIGConfigFailed` Warning Event and `gpu_operator_mig_config_failed_nodes` say the
//! same, and all of it clears once the stand-in reports `success` and restores the labels.

use std::collections::BTreeMap;

use gpu_operator_api::{conditions::operand, labels};
use gpu_operator_harness::{access::kubectl_ok, operator::Operator, wait_until};
use kube::ResourceExt;

use super::{
    support::{Env, TIMEOUT, condition, get, simulated_nodes, wait_policy},
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
