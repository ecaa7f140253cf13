//! NVIDIADriver objects deploying the drivers, with the real API server and DaemonSet controller:
//! a ClusterPolicy with `driver.useNvidiaDriverCRD: true` renders no driver DaemonSet of its own
//! (its `DriverReady` says NVIDIADrivers manage the drivers) but keeps the driver's
//! ServiceAccount; two NVIDIADrivers selecting one GPU node each get DaemonSets named after them
//! (`nvidia-gpu-driver-<cr>-<os>`), selecting their node, owned by them, with pods ready on
//! their nodes, and a `DriverReady` condition in their status; deleting one NVIDIADriver takes its
//! DaemonSets away and leaves the other's. The scenario starts on the ClusterPolicy's driver and
//! switches to NVIDIADrivers and back without restarting a driver pod ([`handover`]).
#![cfg(feature = "e2e")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::large_futures
)]

mod conflict;
mod handover;
mod status;
mod upgrades;

use gpu_operator_e2e::scenario as support;

use std::{collections::BTreeMap, time::Duration};

use gpu_operator_api::{
    ClusterPolicy, ClusterPolicySpec, NvidiaDriver, State, conditions::operand::DRIVER_READY,
};
use gpu_operator_harness::{access::kubectl_ok, unique_name, wait_until};
use k8s_openapi::api::{apps::v1::DaemonSet, core::v1::ServiceAccount};
use kube::{
    Api, ResourceExt as _,
    api::{DeleteParams, ListParams, PostParams},
};
use serde_json::json;

use support::{
    Cleanup, Env, IMAGES, TIMEOUT, condition, gpu_nodes, pods_of, setup, simulated_nodes,
    wait_policy,
};

/// The label every driver DaemonSet carries, the ClusterPolicy's and the NVIDIADrivers'.
const COMPONENT: &str = "app.kubernetes.io/component=nvidia-driver";
const HOSTNAME: &str = "kubernetes.io/hostname";
/// NVIDIA's node label naming a GPU node's NVIDIADriver, which its DaemonSets select.
const OWNER: &str = "nvidia.com/gpu-operator.driver.owner";
/// How long this scenario waits for another's ClusterPolicy to go.
const ACTIVE_TIMEOUT: Duration = Duration::from_secs(480);

/// Deletes the NVIDIADrivers this scenario made and the owner labels of the nodes, also when a
/// step panics.
struct Drivers(Vec<String>);

impl Drop for Drivers {
    fn drop(&mut self) {
        for name in &self.0 {
            let _ = kubectl_ok(&[
                "delete",
                "nvidiadriver",
                name,
                "--ignore-not-found",
                "--wait=false",
            ]);
        }
        for label in [OWNER, conflict::POOL] {
            let _ = kubectl_ok(&["label", "nodes", "--all", &format!("{label}-")]);
        }
    }
}

/// The driver DaemonSets of the namespace by name.
async fn driver_daemonsets(env: &Env) -> BTreeMap<String, DaemonSet> {
    env.daemonsets()
        .list(&ListParams::default().labels(COMPONENT))
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|ds| (ds.name_any(), ds))
        .collect()
}

/// The DaemonSets of NVIDIADriver `cr` among `all`: those it controls.
fn owned_by<'a>(all: &'a BTreeMap<String, DaemonSet>, cr: &NvidiaDriver) -> Vec<&'a DaemonSet> {
    all.values()
        .filter(|ds| {
            ds.owner_references().iter().any(|r| {
                r.kind == "NVIDIADriver"
                    && r.controller == Some(true)
                    && Some(&r.uid) == cr.metadata.uid.as_ref()
            })
        })
        .collect()
}

fn names(sets: &[&DaemonSet]) -> Vec<String> {
    sets.iter().map(|ds| ds.name_any()).collect()
}

fn node_selector(ds: &DaemonSet) -> BTreeMap<String, String> {
    ds.spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|p| p.node_selector.clone())
        .unwrap_or_default()
}

/// Waits until `cr` has DaemonSets, every one named after it and selecting the nodes labelled
/// its own, one of them with a pod on `node`; returns their names.
async fn wait_for_driver(env: &Env, cr: &NvidiaDriver, node: &str) -> Vec<String> {
    let name = cr.name_any();
    let prefix = format!("nvidia-gpu-driver-{name}-");
    let found = wait_until(
        &format!("the DaemonSets of NVIDIADriver {name}"),
        TIMEOUT,
        || async {
            let all = driver_daemonsets(env).await;
            let owned = owned_by(&all, cr);
            let placed = !owned.is_empty()
                && owned.iter().all(|ds| {
                    ds.name_any().starts_with(&prefix)
                        && node_selector(ds).get(OWNER) == Some(&name)
                });
            if !placed {
                return Ok(None);
            }
            let mut running = false;
            for ds in &owned {
                let app = ds.labels().get("app").cloned().unwrap_or_default();
                running |= pods_of(env, &app).await.contains_key(node);
            }
            Ok(running.then(|| owned.iter().map(|ds| ds.name_any()).collect::<Vec<_>>()))
        },
    )
    .await;
    match found {
        Ok(names) => names,
        Err(error) => {
            let all = driver_daemonsets(env).await;
            panic!(
                "{error}; driver DaemonSets: {:?}",
                all.keys().collect::<Vec<_>>()
            )
        }
    }
}

fn nvidia_driver(name: &str, node: &str) -> NvidiaDriver {
    nvidia_driver_selecting(name, HOSTNAME, node)
}

/// NVIDIADriver `name` selecting the nodes labelled `key=value`.
fn nvidia_driver_selecting(name: &str, key: &str, value: &str) -> NvidiaDriver {
    serde_json::from_value(json!({
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "NVIDIADriver",
        "metadata": {"name": name},
        "spec": {
            "image": "nvcr.io/nvidia/driver:595.91.07",
            "nodeSelector": {key: value},
        },
    }))
    .unwrap()
}

/// Waits until `name` is the active ClusterPolicy: another scenario's older one on the shared
/// cluster makes it `ignored` until that one goes.
async fn wait_active(env: &Env, name: &str) {
    wait_until(
        "the ClusterPolicy to be the active one",
        ACTIVE_TIMEOUT,
        || async {
            let policy = env.policies().get(name).await?;
            Ok(policy
                .status
                .is_some_and(|s| s.state != State::Ignored)
                .then_some(()))
        },
    )
    .await
    .unwrap();
}

/// Waits until NVIDIADriver `name` has `DriverReady` `True`.
async fn wait_driver_ready(drivers: &Api<NvidiaDriver>, name: &str) {
    wait_until(
        &format!("DriverReady on NVIDIADriver {name}"),
        TIMEOUT,
        || async {
            let live = drivers.get(name).await?;
            let ready = live.status.and_then(|s| s.conditions).is_some_and(|c| {
                c.iter()
                    .any(|c| c.type_ == DRIVER_READY && c.status == "True")
            });
            Ok(ready.then_some(()))
        },
    )
    .await
    .unwrap();
}

/// A default NVIDIADriver (`name`, `default: true`) serves `node`, which no other selects, and
/// deleting it takes its DaemonSets away, not the others' (`kept`).
async fn a_deleted_driver_takes_only_its_daemonsets(
    env: &Env,
    name: &str,
    node: &str,
    kept: Vec<String>,
) {
    let drivers: Api<NvidiaDriver> = Api::all(env.client.clone());
    let mut default = nvidia_driver_selecting(name, HOSTNAME, node);
    default.spec.node_selector = None;
    default.spec.default = true;
    let c = drivers
        .create(&PostParams::default(), &default)
        .await
        .unwrap();
    wait_until(
        "the default NVIDIADriver to serve an unselected node",
        TIMEOUT,
        || async {
            let all = driver_daemonsets(env).await;
            let serves = conflict::owner(env, node).await.as_deref() == Some(name);
            Ok((serves && !owned_by(&all, &c).is_empty()).then_some(()))
        },
    )
    .await
    .unwrap();
    drivers
        .delete(name, &DeleteParams::default())
        .await
        .unwrap();
    wait_until(
        "the deleted NVIDIADriver's DaemonSets to go",
        TIMEOUT,
        || async {
            let all = driver_daemonsets(env).await;
            Ok(owned_by(&all, &c).is_empty().then_some(()))
        },
    )
    .await
    .unwrap();
    let all = driver_daemonsets(env).await;
    assert!(
        kept.iter().all(|name| all.contains_key(name)),
        "the other NVIDIADrivers' DaemonSets stay: {:?}",
        all.keys().collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn nvidia_drivers_deploy_the_drivers_of_their_nodes_and_take_them_away() {
    let env = setup().await;
    let operator = env.start(&IMAGES);
    let policy_name = unique_name("nvidia-drivers");
    let _cleanup = Cleanup {
        namespace: env.namespace.clone(),
        policies: vec![policy_name.clone()],
    };
    let (a_name, b_name) = (unique_name("nvd-a"), unique_name("nvd-b"));
    let mut drivers_made = Drivers(vec![a_name.clone(), b_name.clone()]);
    let nodes = simulated_nodes(&env.client).await;
    let gpus = gpu_nodes(&nodes);
    let [node_a, node_b, node_c, node_d, ..] = gpus.as_slice() else {
        panic!("the fleet has fewer than four GPU nodes: {gpus:?}");
    };

    // The ClusterPolicy's driver first: its pods run on every GPU node.
    env.policies()
        .create(
            &PostParams::default(),
            &ClusterPolicy::new(&policy_name, ClusterPolicySpec::default()),
        )
        .await
        .unwrap();
    wait_active(&env, &policy_name).await;
    let before = wait_until("the ClusterPolicy's driver pods", TIMEOUT, || async {
        let pods = pods_of(&env, handover::POLICY_DRIVER).await;
        Ok(gpus.iter().all(|n| pods.contains_key(n)).then_some(pods))
    })
    .await
    .unwrap();

    let drivers: Api<NvidiaDriver> = Api::all(env.client.clone());
    let a = drivers
        .create(&PostParams::default(), &nvidia_driver(&a_name, node_a))
        .await
        .unwrap();
    // A second pool on another driver version.
    let mut b = nvidia_driver(&b_name, node_b);
    b.spec.image.name = Some("nvcr.io/nvidia/driver:580.95.05".to_owned());
    let b = drivers.create(&PostParams::default(), &b).await.unwrap();
    handover::to_nvidia_drivers(&env, &policy_name, &before, (&a, node_a), (&b, node_b)).await;
    let unselected = gpus.len() - 2;
    wait_policy(
        &env,
        &policy_name,
        "DriverReady to name NVIDIADrivers and the GPU nodes none serves",
        |p| {
            condition(p, DRIVER_READY).is_some_and(|c| {
                // The warning's reason over `Disabled`.
                c.status == "True"
                    && c.reason == "NodesWithoutNVIDIADriver"
                    && c.message.contains("managed by NVIDIADriver objects")
                    // The GPU nodes no NVIDIADriver selects are named.
                    && c.message.contains(&format!("no NVIDIADriver serves {unselected} node(s)"))
                    && c.message.contains(node_c.as_str())
            })
        },
    )
    .await;

    wait_for_driver(&env, &a, node_a).await;

    // The ClusterPolicy renders no driver DaemonSet, but the ServiceAccount the drivers run as.
    let all = driver_daemonsets(&env).await;
    let (a_sets, b_sets) = (names(&owned_by(&all, &a)), names(&owned_by(&all, &b)));
    let unowned: Vec<&String> = all
        .keys()
        .filter(|name| !a_sets.contains(name) && !b_sets.contains(name))
        .collect();
    assert!(
        unowned.is_empty(),
        "driver DaemonSets of no NVIDIADriver: {unowned:?}"
    );
    // Each NVIDIADriver's overall status (see `status`).
    wait_driver_ready(&drivers, &a_name).await;
    status::a_ready_pool_and_a_waiting_one(&env, &operator, &a_name, (&b_name, node_b)).await;
    let a_uid =
        upgrades::a_bump_upgrades_only_its_pool(&env, &policy_name, (&a_name, node_a), node_b)
            .await;
    let account = Api::<ServiceAccount>::namespaced(env.client.clone(), &env.namespace)
        .get("nvidia-driver")
        .await
        .unwrap();
    assert_eq!(account.owner_references()[0].kind, "ClusterPolicy");

    let (d_name, e_name) = (unique_name("nvd-d"), unique_name("nvd-e"));
    drivers_made.0.extend([d_name.clone(), e_name.clone()]);
    conflict::a_node_two_select_is_left_alone(&env, &operator, (&d_name, &e_name), node_d, &before)
        .await;

    let c_name = unique_name("nvd-c");
    drivers_made.0.push(c_name.clone());
    a_deleted_driver_takes_only_its_daemonsets(&env, &c_name, node_c, [a_sets, b_sets].concat())
        .await;

    handover::to_cluster_policy(&env, &policy_name, &before, (&a, node_a, &a_uid), &b).await;
    for name in [&a_name, &b_name] {
        drivers
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
    }
}
