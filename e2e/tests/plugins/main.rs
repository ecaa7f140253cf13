//! The device plugin, MPS control daemon, GPU Feature Discovery and validator DaemonSets end to
//! end, with the operator as a host process: they become Ready on the GPU nodes (the MPS daemon
//! on `mps.capable` ones) with `daemonsets.labels` on every pod; a `mig.strategy` patch rolls
//! exactly those four with the new `MIG_STRATEGY`; the ConfigMap `devicePlugin.config` names is
//! checked, copied and mounted by the config managers, a bad edit refused;
//! GFD can be disabled and enabled; a hand edit is reverted; a no-op change restarts nothing.
#![cfg(feature = "e2e")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::large_futures
)]

mod config;
mod steps;
use gpu_operator_e2e::scenario as support;

use gpu_operator_api::ClusterPolicy;
use gpu_operator_harness::unique_name;
use kube::api::PostParams;
use serde_json::json;

use support::{Cleanup, IMAGES, setup};

#[tokio::test]
async fn plugins_follow_the_cluster_policy_and_roll_only_on_change() {
    let env = setup().await;
    let operator = env.start(&IMAGES);
    let name = unique_name("cluster-policy");
    let _cleanup = Cleanup {
        namespace: env.namespace.clone(),
        policies: vec![name.clone()],
    };
    let policy: ClusterPolicy = serde_json::from_value(json!({
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": name},
        "spec": {
            "operator": {}, "daemonsets": {"labels": {steps::LABEL.0: steps::LABEL.1}},
            "driver": {}, "toolkit": {}, "devicePlugin": {}, "dcgmExporter": {}, "dcgm": {},
            "nodeStatusExporter": {}, "gfd": {}
        }
    }))
    .unwrap();
    env.policies()
        .create(&PostParams::default(), &policy)
        .await
        .unwrap();

    steps::operands_become_ready_with_the_common_labels(&env, &name).await;
    steps::mig_strategy_rolls_exactly_the_four(&env, &name).await;
    config::a_named_config_map_is_checked_then_copied(&env, &name).await;
    steps::gfd_can_be_disabled_and_enabled(&env, &name).await;
    steps::a_hand_edit_is_reverted(&env).await;
    steps::a_no_op_change_restarts_nothing(&env, &name).await;
    operator.stop().unwrap();
}
