//! Two NVIDIADrivers selecting one GPU node: each one's `DriverReady` condition names the node and
//! the other, with a Warning Event each; the node gets no owner label, so neither's DaemonSet
//! covers it, and the driver pod running there keeps running. The positive control:
//! once one of the two goes, the node is the other's and its DaemonSet covers it.

use std::collections::BTreeMap;

use gpu_operator_api::NvidiaDriver;
use gpu_operator_api::conditions::{operand::DRIVER_READY, reason};
use gpu_operator_e2e::quiet;
use gpu_operator_harness::{access::kubectl_ok, operator::Operator, wait_until};
use k8s_openapi::api::core::v1::{Event, Node};
use kube::{
    Api, ResourceExt as _,
    api::{DeleteParams, ListParams, PostParams},
};

use crate::{
    OWNER, driver_daemonsets,
    handover::POLICY_DRIVER,
    nvidia_driver_selecting, owned_by,
    support::{Env, TIMEOUT, pods_of},
};

/// The reconciler that labels nodes (its metric label).
const LABELLER: &str = "node-labels";
/// The node label both NVIDIADrivers select (removed by the scenario's cleanup).
pub const POOL: &str = "e2e.gpu-operator/conflict-pool";

/// The nodes `cr`'s DaemonSets want a pod on (0 without any: it has DaemonSets only for the OSes
/// of its nodes), once the DaemonSet controller has seen their current generation.
async fn desired(env: &Env, cr: &NvidiaDriver) -> Option<i32> {
    let all = driver_daemonsets(env).await;
    let owned = owned_by(&all, cr);
    let mut total = 0;
    for ds in &owned {
        let status = ds.status.clone()?;
        if status.observed_generation != ds.metadata.generation {
            return None;
        }
        total += status.desired_number_scheduled;
    }
    Some(total)
}

/// `node`'s owner label.
pub async fn owner(env: &Env, node: &str) -> Option<String> {
    let nodes: Api<Node> = Api::all(env.client.clone());
    nodes.get(node).await.unwrap().labels().get(OWNER).cloned()
}

/// NVIDIADrivers `d` and `e` both select `node`, which runs the ClusterPolicy's old driver pod
/// (`before`, UID by node).
pub async fn a_node_two_select_is_left_alone(
    env: &Env,
    operator: &Operator,
    (d_name, e_name): (&str, &str),
    node: &str,
    before: &BTreeMap<String, String>,
) {
    let drivers: Api<NvidiaDriver> = Api::all(env.client.clone());
    let mut made = Vec::new();
    for name in [d_name, e_name] {
        let cr = nvidia_driver_selecting(name, POOL, "shared");
        made.push(drivers.create(&PostParams::default(), &cr).await.unwrap());
    }
    let (d, e) = (&made[0], &made[1]);
    // Before any node has the label, each says it selects none.
    for cr in [d, e] {
        wait_until("a pool no node is in, said", TIMEOUT, || async {
            let live = drivers.get(&cr.name_any()).await?;
            let said = live.status.and_then(|s| s.conditions).is_some_and(|c| {
                c.iter()
                    .any(|c| c.type_ == DRIVER_READY && c.reason == "NoNodesSelected")
            });
            Ok((said && desired(env, cr).await == Some(0)).then_some(()))
        })
        .await
        .unwrap();
    }
    // Both see the node at once: one label event, after which the labeller reconciles it.
    let counted = quiet::reconciles(operator).await;
    kubectl_ok(&["label", "node", node, &format!("{POOL}=shared")]).unwrap();
    quiet::wait_reconciled_after(operator, &counted, &[LABELLER.to_owned()], "the pool label")
        .await;
    // Said: each one's condition names the node and the other, and a Warning Event each.
    for (cr, other) in [(d_name, e_name), (e_name, d_name)] {
        wait_until(
            &format!("{cr}'s condition to name the conflict"),
            TIMEOUT,
            || async {
                let live = drivers.get(cr).await?;
                let named = live.status.and_then(|s| s.conditions).is_some_and(|c| {
                    c.iter().any(|c| {
                        c.type_ == DRIVER_READY
                            && c.message.contains(node)
                            && c.message.contains(other)
                    })
                });
                Ok(named.then_some(()))
            },
        )
        .await
        .unwrap();
        wait_until(&format!("a Warning Event on {cr}"), TIMEOUT, || async {
            let events: Api<Event> = Api::all(env.client.clone());
            let found = events
                .list(&ListParams::default())
                .await?
                .items
                .iter()
                .any(|e| {
                    e.type_.as_deref() == Some("Warning")
                        && e.reason.as_deref() == Some("NodeSelectorConflict")
                        && e.involved_object.name.as_deref() == Some(cr)
                });
            Ok(found.then_some(()))
        })
        .await
        .unwrap();
    }
    // Each one's overall status is notReady naming the node and the other (NVIDIA's reason).
    for (cr, other) in [(d_name, e_name), (e_name, d_name)] {
        crate::status::wait_overall(
            env,
            cr,
            "notReady",
            reason::CONFLICTING_NODE_SELECTOR,
            &[node, other],
        )
        .await;
    }
    assert_eq!(owner(env, node).await, None, "the node is nobody's");
    for cr in [d, e] {
        assert_eq!(
            desired(env, cr).await,
            Some(0),
            "{}: no pod for the node",
            cr.name_any()
        );
    }
    assert_eq!(
        pods_of(env, POLICY_DRIVER).await.get(node),
        before.get(node),
        "the driver pod running there is left alone"
    );

    // The positive control: `e` goes, the node is `d`'s and its DaemonSet wants a pod there.
    drivers
        .delete(e_name, &DeleteParams::default())
        .await
        .unwrap();
    wait_until("the node to be d's", TIMEOUT, || async {
        let owned = owner(env, node).await.as_deref() == Some(d_name);
        Ok((owned && desired(env, d).await == Some(1)).then_some(()))
    })
    .await
    .unwrap();
    drivers
        .delete(d_name, &DeleteParams::default())
        .await
        .unwrap();
}
