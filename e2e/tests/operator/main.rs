//! The operator end to end, as a host process under a ServiceAccount token: a ClusterPolicy becomes
//! labelled GPU nodes, two operand DaemonSets with a Ready pod per GPU node, and a truthful status;
//! toggles, bad input, a second ClusterPolicy, restarts (SIGTERM while writes wait on the API
//! server) and garbage collection behave; and once
//! converged the operator sends no write at all (counted in the API server's audit log).
#![cfg(feature = "e2e")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::large_futures
)]

use gpu_operator_e2e::quiet;
mod shutdown;
mod steps;
use gpu_operator_e2e::scenario as support;

use gpu_operator_api::{ClusterPolicy, ClusterPolicySpec};
use gpu_operator_harness::unique_name;
use kube::api::PostParams;

use support::{Cleanup, IMAGES, setup};

#[tokio::test]
async fn the_operator_turns_a_cluster_policy_into_ready_operands_and_then_stays_quiet() {
    let env = setup().await;
    let operator = env.start(&IMAGES);
    let name = unique_name("cluster-policy");
    let _cleanup = Cleanup {
        namespace: env.namespace.clone(),
        policies: vec![name.clone(), format!("{name}-second")],
    };
    let policy = ClusterPolicy::new(&name, ClusterPolicySpec::default());
    env.policies()
        .create(&PostParams::default(), &policy)
        .await
        .unwrap();

    steps::labels_daemonsets_and_status_become_ready(&env, &name).await;
    steps::a_new_node_is_covered_and_an_opt_out_is_kept(&env, &operator).await;
    steps::disabling_deletes_and_enabling_recreates(&env, &name).await;
    steps::a_daemonset_deleted_by_hand_comes_back(&env, &name).await;
    steps::a_second_policy_is_ignored(&env, &name).await;
    let operator = steps::a_restart_rewrites_nothing(&env, &name, operator).await;
    steps::the_second_policy_is_deleted(&env, &name).await;
    let operator =
        shutdown::sigterm_while_writes_wait_on_the_api_server(&env, &name, operator).await;
    steps::steady_state_sends_no_writes(&env, &name, &operator).await;
    let operator = steps::an_unresolvable_image_is_reported(&env, &name, operator).await;
    steps::deleting_the_policy_collects_everything(&env, &name).await;
    operator.stop().unwrap();
}
