//! Settings that would silently not apply are said, with the nodes they concern: a device plugin
//! config named without a default leaves the unlabelled GPU nodes on the plugin's built-in
//! settings (DevicePluginReady and a Warning Event count and name them), and sandbox workloads in
//! `kata` mode without the Kata device plugin leave the node labelled `vm-passthrough` without a
//! device plugin: SandboxWorkloadsReady is False naming the node and the fix. Nothing running is
//! restarted for it.
#![cfg(feature = "e2e")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::large_futures
)]

use gpu_operator_e2e::scenario as support;

use gpu_operator_api::{
    ClusterPolicy, ClusterPolicySpec,
    conditions::operand::DEVICE_PLUGIN_READY,
    spec::{DevicePluginConfig, SandboxMode, SandboxWorkloadsSpec},
};
use gpu_operator_harness::{access::kubectl_ok, unique_name, wait_until};
use k8s_openapi::api::core::v1::{ConfigMap, Event};
use kube::{
    Api,
    api::{ListParams, PostParams},
};
use serde_json::json;

use support::{
    Cleanup, Env, IMAGES, PLUGIN, TIMEOUT, condition, gpu_nodes, pods_of, setup, simulated_nodes,
    wait_ds_ready, wait_policy,
};

const SANDBOX_READY: &str = "SandboxWorkloadsReady";
const WORKLOAD: &str = "nvidia.com/gpu.workload.config";
const PLUGIN_CONFIG: &str = "nvidia.com/device-plugin.config";

/// Removes the labels this scenario put on nodes, also when a step panics.
struct NodeLabels(Vec<(String, &'static str)>);

impl Drop for NodeLabels {
    fn drop(&mut self) {
        for (node, key) in &self.0 {
            let _ = kubectl_ok(&["label", "node", node, &format!("{key}-")]);
        }
    }
}

/// The Warning Events about `policy` with `reason`.
async fn warnings(env: &Env, policy: &str, reason: &str) -> Vec<Event> {
    let events: Api<Event> = Api::all(env.client.clone());
    events
        .list(&ListParams::default().fields(&format!("involvedObject.name={policy}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.type_.as_deref() == Some("Warning") && e.reason.as_deref() == Some(reason))
        .collect()
}

async fn wait_warning(env: &Env, policy: &str, reason: &str, mentions: &str) -> Event {
    let found = wait_until(
        &format!("a Warning Event {reason}: {mentions}"),
        TIMEOUT,
        || async {
            Ok(warnings(env, policy, reason)
                .await
                .into_iter()
                .find(|e| e.message.as_deref().is_some_and(|m| m.contains(mentions))))
        },
    )
    .await;
    found.unwrap()
}

/// The ConfigMap `devicePlugin.config.name` names, with one time-slicing config `any`.
async fn plugin_configs(env: &Env) {
    let config: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "time-slicing-config"},
        "data": {"any": "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n"}
    }))
    .unwrap();
    Api::<ConfigMap>::namespaced(env.client.clone(), &env.namespace)
        .create(&PostParams::default(), &config)
        .await
        .unwrap();
}

/// A ClusterPolicy naming the plugin configs without a default, with sandbox workloads on in
/// `kata` mode and no Kata device plugin.
async fn create_policy(env: &Env, name: &str) {
    let mut spec = ClusterPolicySpec::default();
    spec.device_plugin.config = Some(DevicePluginConfig {
        name: Some("time-slicing-config".into()),
        default: None,
    });
    spec.sandbox_workloads = Some(SandboxWorkloadsSpec {
        enabled: Some(true),
        mode: Some(SandboxMode::Kata),
        ..SandboxWorkloadsSpec::default()
    });
    let policy = ClusterPolicy::new(name, spec);
    env.policies()
        .create(&PostParams::default(), &policy)
        .await
        .unwrap();
}

#[tokio::test]
async fn unapplied_plugin_configs_and_sandbox_workloads_are_said_with_their_nodes() {
    let env = setup().await;
    let mut gpus = gpu_nodes(&simulated_nodes(&env.client).await);
    gpus.sort();
    // One GPU node is for VM passthrough: with sandbox workloads it gets no operands from us.
    let vm_node = gpus[0].clone();
    let mut labels = NodeLabels(vec![(vm_node.clone(), WORKLOAD)]);
    kubectl_ok(&[
        "label",
        "node",
        &vm_node,
        &format!("{WORKLOAD}=vm-passthrough"),
        "--overwrite",
    ])
    .unwrap();
    plugin_configs(&env).await;
    let operator = env.start(&IMAGES);
    let name = unique_name("unsupported");
    let _cleanup = Cleanup {
        namespace: env.namespace.clone(),
        policies: vec![name.clone()],
    };
    create_policy(&env, &name).await;

    // Sandbox workloads: the VM node left without a device plugin is named, with the fix.
    let sandbox = format!(
        "1 node(s) ({vm_node}) vm-passthrough get no device plugin: sandboxWorkloads.mode=kata"
    );
    wait_policy(
        &env,
        &name,
        "SandboxWorkloadsReady to name the VM node without a device plugin",
        |p| {
            condition(p, SANDBOX_READY).is_some_and(|c| {
                c.status == "False"
                    && c.reason == "NoDevicePlugin"
                    && c.message.starts_with(&sandbox)
                    && c.message
                        .contains("set kataSandboxDevicePlugin.enabled=true")
            })
        },
    )
    .await;

    // The device plugin runs on the other GPU nodes, none labelled with a config.
    let plugin_nodes = gpus.len() - 1;
    let first = format!("{plugin_nodes} node(s) ({}", gpus[1]);
    let unapplied = |count: &str| {
        let count = count.to_owned();
        move |p: &ClusterPolicy| {
            condition(p, DEVICE_PLUGIN_READY).is_some_and(|c| {
                c.reason == "ConfigNotApplied"
                    && c.message.contains(&count)
                    && c.message.contains("set devicePlugin.config.default")
            })
        }
    };
    wait_policy(
        &env,
        &name,
        "DevicePluginReady to count the unconfigured nodes",
        unapplied(&first),
    )
    .await;
    wait_warning(&env, &name, "ConfigNotApplied", &first).await;
    wait_ds_ready(&env, PLUGIN, Some(&gpus[1])).await;
    let running = pods_of(&env, PLUGIN).await;
    assert_eq!(running.len(), plugin_nodes, "{running:?}");

    // Labelling one node with a config: one node fewer, said in a new Event (positive control
    // for the absence checks below).
    labels.0.push((gpus[1].clone(), PLUGIN_CONFIG));
    kubectl_ok(&[
        "label",
        "node",
        &gpus[1],
        &format!("{PLUGIN_CONFIG}=any"),
        "--overwrite",
    ])
    .unwrap();
    let fewer = format!("{} node(s) ({}", plugin_nodes - 1, gpus[2]);
    wait_policy(
        &env,
        &name,
        "DevicePluginReady to count one node fewer",
        unapplied(&fewer),
    )
    .await;
    wait_warning(&env, &name, "ConfigNotApplied", &fewer).await;

    // Reporting restarted nothing.
    assert_eq!(
        pods_of(&env, PLUGIN).await,
        running,
        "device plugin pods restarted"
    );
    operator.stop().unwrap();
}
