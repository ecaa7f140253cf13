//! The driver and the container toolkit end to end: on the simulated fleet (Ubuntu 22.04, RHEL 9.4
//! and Ubuntu 24.04 GPU nodes) the driver runs one `OnDelete` DaemonSet per OS with the OS in its
//! image tag, the toolkit configures containerd (preferred over CRI-O), the NVIDIA RuntimeClasses
//! exist; precompiled drivers give one DaemonSet per kernel and the per-OS ones go; disabling the
//! driver deletes its DaemonSets; disabling the toolkit keeps the RuntimeClasses.
#![cfg(feature = "e2e")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::large_futures
)]

use gpu_operator_e2e::scenario as support;

use std::collections::{BTreeMap, BTreeSet};

use gpu_operator_api::{ClusterPolicy, ClusterPolicySpec, conditions};
use gpu_operator_harness::{unique_name, wait_until};
use k8s_openapi::api::{apps::v1::DaemonSet, node::v1::RuntimeClass};
use kube::{
    Api, ResourceExt as _,
    api::{ListParams, Patch, PatchParams, PostParams},
};
use serde_json::json;

use support::{
    Cleanup, Env, IMAGES, TIMEOUT, condition, gpu_nodes, is_ready, pods_of, setup, simulated_nodes,
    wait_policy,
};

const DRIVER_APP: &str = "nvidia-driver-daemonset";
const TOOLKIT: &str = "nvidia-container-toolkit-daemonset";
const OS_ID: &str = "feature.node.kubernetes.io/system-os_release.ID";
const OS_VERSION: &str = "feature.node.kubernetes.io/system-os_release.VERSION_ID";
const KERNEL: &str = "feature.node.kubernetes.io/kernel-version.full";
const RUNTIME_CLASSES: [&str; 3] = ["nvidia", "nvidia-cdi", "nvidia-legacy"];

/// The driver DaemonSets by name.
async fn driver_daemonsets(env: &Env) -> BTreeMap<String, DaemonSet> {
    env.daemonsets()
        .list(&ListParams::default().labels(&format!("app={DRIVER_APP}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|ds| (ds.name_any(), ds))
        .collect()
}

/// Waits until the driver DaemonSets are exactly `names`, each with every desired pod ready.
async fn wait_driver_daemonsets(
    env: &Env,
    names: &BTreeSet<String>,
) -> BTreeMap<String, DaemonSet> {
    let result = wait_until("the expected driver DaemonSets, Ready", TIMEOUT, || async {
        let found = driver_daemonsets(env).await;
        let ready = found.keys().cloned().collect::<BTreeSet<_>>() == *names
            && found.values().all(|ds| {
                let s = ds.status.clone().unwrap_or_default();
                s.desired_number_scheduled > 0 && s.number_ready == s.desired_number_scheduled
            });
        Ok(ready.then_some(found))
    })
    .await;
    result.unwrap_or_else(|error| panic!("{error}; wanted {names:?}"))
}

fn image(ds: &DaemonSet, container: &str) -> String {
    ds.spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .containers
        .iter()
        .find(|c| c.name == container)
        .and_then(|c| c.image.clone())
        .unwrap()
}

async fn patch(env: &Env, name: &str, spec: serde_json::Value) {
    env.policies()
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({ "spec": spec })),
        )
        .await
        .unwrap();
}

fn runtime_classes(env: &Env) -> Api<RuntimeClass> {
    Api::all(env.client.clone())
}

type NodeInfo = (String, String, String, String);

/// (name, OS id, OS version, kernel) of the GPU nodes.
async fn gpu_node_info(env: &Env) -> Vec<NodeInfo> {
    let nodes = simulated_nodes(&env.client).await;
    let gpus = gpu_nodes(&nodes);
    nodes
        .iter()
        .filter(|n| gpus.contains(&n.name_any()))
        .map(|n| {
            let label = |key: &str| n.labels()[key].clone();
            (n.name_any(), label(OS_ID), label(OS_VERSION), label(KERNEL))
        })
        .collect()
}

/// One driver DaemonSet per OS of the GPU nodes, the OS in the tag (RHEL: major only), OnDelete,
/// a driver pod on every GPU node.
async fn one_driver_daemonset_per_os(env: &Env, gpus: &[NodeInfo]) {
    let oses: BTreeSet<(String, String)> = gpus
        .iter()
        .map(|(_, id, version, _)| (id.clone(), version.clone()))
        .collect();
    assert!(oses.len() > 1, "the default fleet mixes OSes: {oses:?}");
    let per_os: BTreeSet<String> = oses
        .iter()
        .map(|(id, version)| format!("{DRIVER_APP}-{id}{version}"))
        .collect();
    let found = wait_driver_daemonsets(env, &per_os).await;
    for (id, version) in &oses {
        let ds = &found[&format!("{DRIVER_APP}-{id}{version}")];
        let tag = match id.as_str() {
            "rhel" => format!("{id}{}", version.split('.').next().unwrap()),
            _ => format!("{id}{version}"),
        };
        assert_eq!(
            image(ds, "nvidia-driver-ctr"),
            format!("nvcr.io/nvidia/driver:595.91.07-{tag}")
        );
        let strategy = ds.spec.as_ref().unwrap().update_strategy.clone().unwrap();
        assert_eq!(strategy.type_.as_deref(), Some("OnDelete"));
        let expected = gpus
            .iter()
            .filter(|(_, i, v, _)| i == id && v == version)
            .count();
        let desired = ds.status.clone().unwrap().desired_number_scheduled;
        assert_eq!(usize::try_from(desired).unwrap(), expected, "{id}{version}");
    }
    let pods = pods_of(env, DRIVER_APP).await;
    assert!(gpus.iter().all(|(n, ..)| pods.contains_key(n)), "{pods:?}");
}

/// The toolkit on every GPU node configuring containerd (preferred over CRI-O), and the
/// RuntimeClasses with NVIDIA's handlers.
async fn toolkit_and_runtime_classes(env: &Env, gpus: &[NodeInfo]) {
    let pods = pods_of(env, TOOLKIT).await;
    assert!(gpus.iter().all(|(n, ..)| pods.contains_key(n)), "{pods:?}");
    let toolkit = env.daemonsets().get(TOOLKIT).await.unwrap();
    let ctr = &toolkit.spec.unwrap().template.spec.unwrap().containers[0];
    let runtime = ctr
        .env
        .iter()
        .flatten()
        .find(|e| e.name == "RUNTIME")
        .unwrap();
    assert_eq!(runtime.value.as_deref(), Some("containerd"));
    for class in RUNTIME_CLASSES {
        assert_eq!(
            runtime_classes(env).get(class).await.unwrap().handler,
            class
        );
    }
}

/// Precompiled drivers: one DaemonSet per kernel, tagged `<branch>-<kernel>-<os>`; the per-OS
/// DaemonSets are pruned.
async fn one_driver_daemonset_per_kernel(env: &Env, name: &str, gpus: &[NodeInfo]) {
    patch(
        env,
        name,
        json!({"driver": {"usePrecompiled": true, "repository": "nvcr.io/nvidia",
                          "image": "driver", "version": "570"}}),
    )
    .await;
    let per_kernel: BTreeSet<String> = gpus
        .iter()
        .map(|(_, id, version, kernel)| {
            let sanitized = kernel.replace("x86_64", "").replace('_', ".");
            format!(
                "{DRIVER_APP}-{}-{id}{version}",
                sanitized.trim_end_matches('.')
            )
        })
        .collect();
    let found = wait_driver_daemonsets(env, &per_kernel).await;
    for ds in found.values() {
        let pod = ds.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
        let kernel = &pod.node_selector.as_ref().unwrap()[KERNEL];
        let image = image(ds, "nvidia-driver-ctr");
        assert!(image.contains(&format!(":570-{kernel}-")), "{image}");
    }
}

/// Disabling the driver deletes every driver DaemonSet; disabling the toolkit deletes its
/// DaemonSet but keeps the RuntimeClasses.
async fn disabling_deletes_but_keeps_runtime_classes(env: &Env, name: &str) {
    patch(env, name, json!({"driver": {"enabled": false}})).await;
    wait_until("the driver DaemonSets to go", TIMEOUT, || async {
        Ok(driver_daemonsets(env).await.is_empty().then_some(()))
    })
    .await
    .unwrap();
    wait_policy(env, name, "DriverReady to say Disabled", |p| {
        condition(p, conditions::operand::DRIVER_READY).is_some_and(|c| c.reason == "Disabled")
    })
    .await;
    patch(env, name, json!({"toolkit": {"enabled": false}})).await;
    wait_until("the toolkit DaemonSet to go", TIMEOUT, || async {
        Ok(env
            .daemonsets()
            .get_opt(TOOLKIT)
            .await?
            .is_none()
            .then_some(()))
    })
    .await
    .unwrap();
    for class in RUNTIME_CLASSES {
        let kept = runtime_classes(env).get_opt(class).await.unwrap();
        assert!(kept.is_some(), "{class} is kept");
    }
}

#[tokio::test]
async fn driver_and_toolkit_follow_the_fleets_os_kernels_and_runtimes() {
    let env = setup().await;
    let operator = env.start(&IMAGES);
    let name = unique_name("driver-policy");
    let _cleanup = Cleanup {
        namespace: env.namespace.clone(),
        policies: vec![name.clone()],
    };
    env.policies()
        .create(
            &PostParams::default(),
            &ClusterPolicy::new(&name, ClusterPolicySpec::default()),
        )
        .await
        .unwrap();
    let policy = wait_policy(&env, &name, "the ClusterPolicy to become ready", is_ready).await;
    for type_ in [
        conditions::operand::DRIVER_READY,
        conditions::operand::TOOLKIT_READY,
    ] {
        let c = condition(&policy, type_).unwrap();
        assert_eq!(c.status, "True", "{type_}: {c:?}");
    }
    let gpus = gpu_node_info(&env).await;
    one_driver_daemonset_per_os(&env, &gpus).await;
    toolkit_and_runtime_classes(&env, &gpus).await;
    one_driver_daemonset_per_kernel(&env, &name, &gpus).await;
    disabling_deletes_but_keeps_runtime_classes(&env, &name).await;
    operator.stop().unwrap();
}
