//! The steps of the operator's end-to-end scenario, in the order the test runs them.

use std::{collections::BTreeMap, time::Duration};

use gpu_operator_api::{ClusterPolicy, ClusterPolicySpec, State, conditions};
use gpu_operator_core::pipeline::write_gate;
use gpu_operator_harness::{
    fleet::Profile,
    operator::{Operator, writes_by},
    unique_name, wait_until,
};
use k8s_openapi::{
    api::{
        apps::v1::DaemonSet,
        core::v1::{Event, Node},
    },
    jiff::Timestamp,
};
use kube::{
    Api, ResourceExt as _,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
};
use serde_json::json;

use super::{quiet, support::*};

/// The node labeller's reconciler, as `/metrics` names it.
const NODE_LABELS: &str = "node-labels";

/// Labels, both DaemonSets, a Ready pod per GPU node, a ready status.
pub async fn labels_daemonsets_and_status_become_ready(env: &Env, name: &str) {
    let nodes = simulated_nodes(&env.client).await;
    let gpus = gpu_nodes(&nodes);
    let ready = wait_policy(env, name, "the ClusterPolicy to become ready", is_ready).await;
    for type_ in [
        conditions::operand::DEVICE_PLUGIN_READY,
        conditions::operand::VALIDATOR_READY,
    ] {
        let c = condition(&ready, type_).unwrap();
        assert_eq!(c.status, "True", "{type_}: {c:?}");
        let counts = c
            .message
            .trim_start_matches("ready on ")
            .split(' ')
            .next()
            .unwrap();
        let (ready, desired) = counts.split_once('/').unwrap();
        assert!(
            ready == desired && desired.parse::<usize>().unwrap() >= gpus.len(),
            "{type_}: {}",
            c.message
        );
    }
    assert_eq!(
        ready.status.as_ref().unwrap().namespace.as_deref(),
        Some(env.namespace.as_str())
    );
    for app in [PLUGIN, VALIDATOR] {
        let pods = pods_of(env, app).await;
        let cpu: Vec<String> = nodes
            .iter()
            .map(kube::ResourceExt::name_any)
            .filter(|n| !gpus.contains(n))
            .collect();
        assert!(
            gpus.iter().all(|g| pods.contains_key(g)),
            "{app}: a pod on every GPU node: {pods:?}"
        );
        assert!(
            cpu.iter().all(|c| !pods.contains_key(c)),
            "{app}: no pod on CPU-only nodes: {pods:?}"
        );
    }
    let labelled = simulated_nodes(&env.client).await;
    for node in &labelled {
        let gpu = gpus.contains(&node.name_any());
        assert_eq!(
            node.labels()
                .get("nvidia.com/gpu.present")
                .map(String::as_str)
                == Some("true"),
            gpu,
            "{}",
            node.name_any()
        );
        assert_eq!(
            node.labels()
                .contains_key("nvidia.com/gpu.deploy.device-plugin"),
            gpu,
            "{}",
            node.name_any()
        );
    }
}

/// A new GPU node is labelled and covered; opting it out of the plugin removes that pod only.
pub async fn a_new_node_is_covered_and_an_opt_out_is_kept(env: &Env, operator: &Operator) {
    let extra = unique_name("kwok-extra");
    let created_at = Timestamp::now();
    Api::<Node>::all(env.client.clone())
        .create(&PostParams::default(), &Profile::A100.node(&extra))
        .await
        .unwrap();
    wait_ds_ready(env, PLUGIN, Some(&extra)).await;
    wait_ds_ready(env, VALIDATOR, Some(&extra)).await;
    let patches_of_extra = |since| {
        writes_by(&env.user, since)
            .unwrap()
            .into_iter()
            .filter(|w| w.resource == "nodes" && w.name == extra)
            .count()
    };
    // Positive control: the audit log shows the operator labelling the new node.
    assert!(
        patches_of_extra(created_at) > 0,
        "the operator's labels of {extra} are not in the audit log"
    );
    let before = quiet::reconciles(operator).await;
    let opted_out_at = Timestamp::now();
    let opt_out = json!({"metadata": {"labels": {"nvidia.com/gpu.deploy.device-plugin": "false"}}});
    Api::<Node>::all(env.client.clone())
        .patch(&extra, &PatchParams::default(), &Patch::Merge(&opt_out))
        .await
        .unwrap();
    wait_until(
        "the plugin pod to leave the opted-out node",
        TIMEOUT,
        || async { Ok((!pods_of(env, PLUGIN).await.contains_key(&extra)).then_some(())) },
    )
    .await
    .unwrap();
    // The marker: the node labeller has finished a reconcile after the opt-out.
    quiet::wait_reconciled_after(operator, &before, &[NODE_LABELS.to_owned()], "the opt-out").await;
    assert_eq!(
        patches_of_extra(opted_out_at),
        0,
        "the operator patched the opted-out node"
    );
    let node = Api::<Node>::all(env.client.clone())
        .get(&extra)
        .await
        .unwrap();
    assert_eq!(
        node.labels()["nvidia.com/gpu.deploy.device-plugin"],
        "false",
        "the operator must not overwrite an opt-out"
    );
    assert!(
        pods_of(env, VALIDATOR).await.contains_key(&extra),
        "other operands stay"
    );
    Api::<Node>::all(env.client.clone())
        .delete(&extra, &DeleteParams::default())
        .await
        .unwrap();
    // Without a kubelet nobody removes the pods bound to the deleted node until the pod garbage
    // collector does, about a minute later, in the middle of a later step: remove them now.
    let on_extra = ListParams::default().fields(&format!("spec.nodeName={extra}"));
    env.pods()
        .delete_collection(&DeleteParams::default().grace_period(0), &on_extra)
        .await
        .unwrap();
    wait_until("the deleted node's pods to be gone", TIMEOUT, || async {
        Ok(env
            .pods()
            .list(&on_extra)
            .await?
            .items
            .is_empty()
            .then_some(()))
    })
    .await
    .unwrap();
    wait_ds_ready(env, PLUGIN, None).await;
}

/// Disabling the device plugin deletes its DaemonSet; enabling recreates it.
pub async fn disabling_deletes_and_enabling_recreates(env: &Env, name: &str) {
    let toggle = |enabled: bool| json!({"spec": {"devicePlugin": {"enabled": enabled}}});
    env.policies()
        .patch(name, &PatchParams::default(), &Patch::Merge(&toggle(false)))
        .await
        .unwrap();
    let disabled = wait_policy(env, name, "DevicePluginReady to say disabled", |p| {
        condition(p, conditions::operand::DEVICE_PLUGIN_READY).is_some_and(|c| {
            c.reason == "Disabled" && c.observed_generation == p.metadata.generation
        })
    })
    .await;
    assert!(
        condition(&disabled, conditions::operand::DEVICE_PLUGIN_READY)
            .unwrap()
            .message
            .contains("devicePlugin.enabled is false")
    );
    wait_until("the plugin DaemonSet to be deleted", TIMEOUT, || async {
        Ok(env
            .daemonsets()
            .get_opt(PLUGIN)
            .await?
            .is_none()
            .then_some(()))
    })
    .await
    .unwrap();
    env.policies()
        .patch(name, &PatchParams::default(), &Patch::Merge(&toggle(true)))
        .await
        .unwrap();
    wait_ds_ready(env, PLUGIN, None).await;
    wait_policy(env, name, "the ClusterPolicy to be ready again", is_ready).await;
}

/// A DaemonSet of ours deleted by hand comes back at once: its deletion alone wakes the
/// reconciler (nothing else changes meanwhile, and nothing is requeued while converged, so a
/// reconciler blind to deletions would never recreate it).
pub async fn a_daemonset_deleted_by_hand_comes_back(env: &Env, name: &str) {
    wait_policy(env, name, "the ClusterPolicy to be ready", is_ready).await;
    // Let every timer of the previous steps run out first: a status change still waiting for its
    // quiet time requeues its reconciler within QUIET + BURST; once current, a reconciler
    // requeues hourly. After this, only a watch event can wake the validator's reconciler.
    tokio::time::sleep(write_gate::QUIET + write_gate::BURST + Duration::from_secs(1)).await;
    let old = env.daemonsets().get(VALIDATOR).await.unwrap().uid();
    env.daemonsets()
        .delete(VALIDATOR, &DeleteParams::default())
        .await
        .unwrap();
    // Well below the status's quiet time plus a reconcile: watch-driven only.
    wait_until(
        "the deleted DaemonSet recreated",
        Duration::from_secs(8),
        || async {
            let uid = env
                .daemonsets()
                .get_opt(VALIDATOR)
                .await?
                .and_then(|d| d.uid());
            Ok((uid.is_some() && uid != old).then_some(()))
        },
    )
    .await
    .unwrap();
    wait_ds_ready(env, VALIDATOR, None).await;
    wait_policy(env, name, "the ClusterPolicy to be ready again", is_ready).await;
}

/// A second ClusterPolicy is ignored and says which one is active.
pub async fn a_second_policy_is_ignored(env: &Env, name: &str) {
    let second = format!("{name}-second");
    env.policies()
        .create(
            &PostParams::default(),
            &ClusterPolicy::new(&second, ClusterPolicySpec::default()),
        )
        .await
        .unwrap();
    let ignored = wait_policy(
        env,
        &second,
        "the second ClusterPolicy to be ignored",
        |p| p.status.as_ref().is_some_and(|s| s.state == State::Ignored),
    )
    .await;
    assert!(
        condition(&ignored, conditions::READY)
            .unwrap()
            .message
            .contains(name),
        "names the active one"
    );
}

/// The ignored second ClusterPolicy goes away.
pub async fn the_second_policy_is_deleted(env: &Env, name: &str) {
    env.policies()
        .delete(&format!("{name}-second"), &DeleteParams::default())
        .await
        .unwrap();
}

/// A restart rewrites nothing and restarts no pod: read once every reconciler of the restarted
/// operator has finished its first reconcile (the marker), with the restarted operator's Lease
/// write as the positive control that the audit log shows its user's writes. The stop is a
/// SIGTERM while a second ClusterPolicy is ignored, and the process must end within
/// [`SHUTDOWN_BOUND`] (it once waited for a driver upgrade reconcile that never ended).
pub async fn a_restart_rewrites_nothing(env: &Env, name: &str, operator: Operator) -> Operator {
    wait_settled(env, name, Duration::from_secs(5)).await;
    let reconcilers: Vec<String> = quiet::reconciles(&operator).await.into_keys().collect();
    let before: Vec<BTreeMap<String, String>> =
        vec![pods_of(env, PLUGIN).await, pods_of(env, VALIDATOR).await];
    let versions = |ds: Vec<DaemonSet>| {
        ds.into_iter()
            .map(|d| (d.name_any(), d.resource_version().unwrap()))
            .collect::<BTreeMap<_, _>>()
    };
    let ds_before = versions(
        env.daemonsets()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items,
    );
    let took = operator.stop().unwrap();
    assert!(
        took < SHUTDOWN_BOUND,
        "SIGTERM with an ignored ClusterPolicy: the operator took {took:?} to exit (bound \
         {SHUTDOWN_BOUND:?})"
    );
    let restarted_at = Timestamp::now();
    let mut operator = env.start(&IMAGES);
    wait_until("the restarted operator to be ready", TIMEOUT, || async {
        let url = format!("http://127.0.0.1:{}/readyz", operator.probe_port);
        Ok(probe(&url).await.then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", operator.log_tail()));
    quiet::wait_reconciled_after(&operator, &BTreeMap::new(), &reconcilers, "the restart").await;
    assert!(operator.is_running(), "{}", operator.log_tail());
    assert_eq!(
        vec![pods_of(env, PLUGIN).await, pods_of(env, VALIDATOR).await],
        before,
        "no operand pod restarted"
    );
    assert_eq!(
        versions(
            env.daemonsets()
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
        ),
        ds_before,
        "no DaemonSet rewritten"
    );
    let all = writes_by(&env.user, restarted_at).unwrap();
    assert!(
        all.iter().any(|w| w.resource == "leases"),
        "the restarted operator's Lease writes are not in the audit log: {all:?}"
    );
    let writes: Vec<_> = all.into_iter().filter(|w| w.resource != "leases").collect();
    assert!(
        writes.is_empty(),
        "a restart of a converged operator must write nothing, wrote {writes:?}"
    );
    operator
}

/// Converged: a minute of changes of a node label no operand reads (each ending on the
/// reconcilers' marker) without a single write (the leader-election Lease renewals aside), then
/// the positive control: a hand edit shows up as exactly its revert and one Event.
pub async fn steady_state_sends_no_writes(env: &Env, name: &str, operator: &Operator) {
    let gpus = gpu_nodes(&simulated_nodes(&env.client).await);
    let quiet_from = Timestamp::now();
    let changes =
        quiet::change_unrelated_labels(env, operator, &gpus, Duration::from_secs(60)).await;
    let writes = quiet::operator_writes(env, quiet_from);
    assert!(
        writes.is_empty(),
        "steady state must send no mutating request, sent {writes:?} during {changes} label changes"
    );
    quiet::a_hand_edit_is_exactly_one_revert_and_one_event(
        env,
        name,
        operator,
        "steady state",
        0,
        quiet_from,
    )
    .await;
}

/// An unresolvable image: notReady, ReconcileFailed, an Event, the component named.
pub async fn an_unresolvable_image_is_reported(
    env: &Env,
    name: &str,
    operator: Operator,
) -> Operator {
    operator.stop().unwrap();
    let operator = env.start(&IMAGES[1..]);
    let failed = wait_policy(
        env,
        name,
        "the ClusterPolicy to report the missing image",
        |p| {
            p.status
                .as_ref()
                .is_some_and(|s| s.state == State::NotReady)
                && condition(p, conditions::ERROR).is_some_and(|c| {
                    c.status == "True" && c.reason == conditions::reason::RECONCILE_FAILED
                })
        },
    )
    .await;
    let error = condition(&failed, conditions::ERROR).unwrap();
    assert!(
        error.message.contains("devicePlugin") && error.message.contains("DEVICE_PLUGIN_IMAGE"),
        "{}",
        error.message
    );
    let events: Api<Event> = Api::all(env.client.clone());
    let warning = wait_until("a Warning Event about the image", TIMEOUT, || async {
        let list = events
            .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
            .await?;
        Ok(list.items.into_iter().find(|e| {
            e.type_.as_deref() == Some("Warning")
                && e.reason.as_deref() == Some("ImageUnresolvable")
        }))
    })
    .await
    .unwrap();
    assert!(warning.message.unwrap_or_default().contains("devicePlugin"));
    operator.stop().unwrap();
    let operator = env.start(&IMAGES);
    wait_policy(env, name, "the ClusterPolicy to recover", is_ready).await;
    operator
}

/// Deleting the ClusterPolicy garbage-collects everything it owns.
pub async fn deleting_the_policy_collects_everything(env: &Env, name: &str) {
    env.policies()
        .delete(name, &DeleteParams::background())
        .await
        .unwrap();
    wait_until("the operands to be garbage-collected", TIMEOUT, || async {
        let left = env
            .daemonsets()
            .list(&ListParams::default())
            .await?
            .items
            .len();
        Ok((left == 0).then_some(()))
    })
    .await
    .unwrap();
}
