//! DRA with the real kube-scheduler, beside the device plugin: a ClusterPolicy serves the GPU
//! nodes, a GPUCluster takes the nodes labelled `nvidia.com/gpu.resource-api=dra` (one H100, one
//! T4). The kubelet plugin runs on exactly those, the device plugin on exactly the others; the
//! ResourceSlices the plugin would publish (simulated below the kubelet-plugin boundary) are
//! published with the plugin's pod-bound token, and the admission policy refuses the same token a
//! slice of another node. A pod claiming one `gpu.nvidia.com` device is allocated by the
//! scheduler on a DRA node; a `mig.nvidia.com` claim gets a MIG device of the H100 node once the
//! slice there publishes MIG devices. Converged, the operator writes nothing (unrelated node label
//! changes). Deleting the GPUCluster waits while a claim holds a device of ours, naming it; once
//! the pod is gone, the kubelet plugin goes and then the GPUCluster. A node's switch between the
//! two waits for the GPU workloads on it, both ways ([`switch`]).
#![cfg(feature = "e2e")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::large_futures
)]

use std::{collections::BTreeSet, time::Duration};

use gpu_operator_api::{ClusterPolicy, ClusterPolicySpec, GpuCluster};
use gpu_operator_e2e::{
    dra_scenario::{
        DraCleanup, GPU_CLUSTER, claim_and_schedule, gpu_cluster, label_dra, profile_of,
        publish_whole_gpus, wait_gpu_cluster_ready, wait_pods_on,
    },
    quiet::{change_unrelated_labels, operator_writes},
    scenario as support,
};
use gpu_operator_harness::{
    dra::{self, PLUGIN_DAEMONSET},
    fleet::Profile,
    wait_until,
};
use k8s_openapi::jiff::Timestamp;
use kube::{
    Api,
    api::{DeleteParams, DynamicObject, ListParams, PostParams},
    core::{ApiResource, GroupVersionKind},
};
use serde_json::json;

use support::{Cleanup, Env, IMAGES, PLUGIN, TIMEOUT, gpu_nodes, setup, simulated_nodes};

mod switch;

/// NVIDIA's v26.7.0 sample GPUCluster (`config/samples/nvidia_v1alpha1_gpucluster.yaml`), its
/// fields and values.
fn nvidias_sample() -> serde_json::Value {
    let plugin = json!({"env": [], "resources": {}});
    json!({
        "apiVersion": "nvidia.com/v1alpha1", "kind": "GPUCluster",
        "metadata": {"name": GPU_CLUSTER},
        "spec": {
            "draDriver": {
                "repository": "registry.k8s.io/dra-driver-nvidia", "image": "dra-driver-nvidia-gpu",
                "version": "v0.4.0", "imagePullPolicy": "IfNotPresent", "imagePullSecrets": [],
                "gpus": {"kubeletPlugin": plugin},
                "computeDomains": {"enabled": true, "controller": plugin, "kubeletPlugin": plugin},
            },
            "dcgm": {
                "enabled": false, "repository": "nvcr.io/nvidia/cloud-native", "image": "dcgm",
                "version": "4.5.2-1-ubuntu22.04", "imagePullPolicy": "IfNotPresent",
                "imagePullSecrets": [], "args": [], "env": [], "resources": {}, "hostNetwork": false,
            },
            "dcgmExporter": {
                "enabled": true, "repository": "nvcr.io/nvidia/k8s", "image": "dcgm-exporter",
                "version": "4.5.1-4.8.0-distroless", "imagePullPolicy": "IfNotPresent",
                "imagePullSecrets": [], "args": [], "annotations": {}, "env": [], "resources": {},
                "hostPID": false, "hostNetwork": false, "enablePodLabels": false,
                "enablePodUID": false, "podLabelAllowlistRegex": [],
                "service": {"internalTrafficPolicy": "Cluster"},
                "serviceMonitor": {
                    "enabled": false, "interval": "15s", "scrapeTimeout": "10s",
                    "honorLabels": false, "additionalLabels": {}, "relabelings": [],
                },
            },
            "hostPaths": {
                "rootFS": "/", "driverInstallDir": "/run/nvidia/driver",
                "kubeletRootDir": "/var/lib/kubelet",
            },
            "daemonsets": {
                "labels": {}, "annotations": {}, "priorityClassName": "system-node-critical",
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "updateStrategy": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "1"},
            },
        },
    })
}

/// NVIDIA's sample passes the API server's schema and CEL rules and is stored with every field
/// (a server-side dry run: nothing is created), and a `rootFS` other than `/` is refused.
async fn nvidias_sample_is_stored_unpruned(env: &Env) {
    let api: Api<DynamicObject> = Api::all_with(
        env.client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("nvidia.com", "v1alpha1", "GPUCluster"),
            "gpuclusters",
        ),
    );
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let sample = nvidias_sample();
    let stored = api
        .create(&dry_run, &serde_json::from_value(sample.clone()).unwrap())
        .await
        .unwrap();
    let stored = serde_json::to_value(&stored).unwrap();
    assert!(
        contains(&stored["spec"], &sample["spec"]),
        "stored unpruned, as written: {:#}",
        stored["spec"]
    );
    let mut other_root = sample;
    other_root["spec"]["hostPaths"]["rootFS"] = json!("/host");
    let refused = api
        .create(&dry_run, &serde_json::from_value(other_root).unwrap())
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("hostPaths.rootFS"),
        "{refused}"
    );
}

/// Whether `whole` holds every field of `part` with its value (defaults may be added).
fn contains(whole: &serde_json::Value, part: &serde_json::Value) -> bool {
    match (whole, part) {
        (serde_json::Value::Object(whole), serde_json::Value::Object(part)) => part
            .iter()
            .all(|(key, value)| whole.get(key).is_some_and(|w| contains(w, value))),
        _ => whole == part,
    }
}

#[tokio::test]
async fn dra_pools_beside_the_device_plugin() {
    let env = setup().await;
    let _cleanup = Cleanup {
        namespace: env.namespace.clone(),
        policies: vec![env.namespace.clone()],
    };
    let nodes = simulated_nodes(&env.client).await;
    let gpus = gpu_nodes(&nodes);
    let first = |profile: Profile| {
        gpus.iter()
            .find(|n| profile_of(&nodes, n) == profile)
            .cloned()
            .unwrap()
    };
    let (h100, t4) = (first(Profile::H100), first(Profile::T4));
    let dra_pool: BTreeSet<String> = [h100.clone(), t4.clone()].into();
    let plugin_pool: BTreeSet<String> = gpus
        .iter()
        .filter(|n| !dra_pool.contains(*n))
        .cloned()
        .collect();
    // The switch step relabels one node of the device-plugin pool too.
    let switching = plugin_pool.iter().next().unwrap().clone();
    let _dra_cleanup = DraCleanup(
        dra_pool
            .iter()
            .cloned()
            .chain([switching.clone()])
            .collect(),
    );
    label_dra(&dra_pool);
    let operator = env.start(&IMAGES);
    let policy = ClusterPolicy::new(&env.namespace, ClusterPolicySpec::default());
    env.policies()
        .create(&PostParams::default(), &policy)
        .await
        .unwrap();
    let clusters: Api<GpuCluster> = Api::all(env.client.clone());
    nvidias_sample_is_stored_unpruned(&env).await;
    clusters
        .create(&PostParams::default(), &gpu_cluster())
        .await
        .unwrap();

    // One stack per node: the kubelet plugin on the DRA pool, the device plugin elsewhere.
    wait_pods_on(&env, PLUGIN_DAEMONSET, &dra_pool).await;
    wait_pods_on(&env, PLUGIN, &plugin_pool).await;

    publish_slices(&env, &nodes, &dra_pool, (&h100, &t4)).await;
    switch::switches_wait_for_the_nodes_workloads(
        &env,
        (&t4, Profile::T4),
        &switching,
        &dra_pool,
        &plugin_pool,
    )
    .await;

    // The scheduler allocates a GPU of the DRA pool, never of the device-plugin pool.
    let node = claim_and_schedule(&env, "whole-gpu", "gpu.nvidia.com").await;
    assert!(dra_pool.contains(&node), "allocated on {node}");

    // MIG: the H100 node's plugin republishes its GPUs as MIG devices.
    let client = dra::plugin_client(&env.client, &env.namespace, &h100)
        .await
        .unwrap();
    let mig = dra::gpu_slice(&h100, Profile::H100, Some(("1g.10gb", 7)), 2).unwrap();
    dra::publish(&client, &mig).await.unwrap();
    let node = claim_and_schedule(&env, "mig-slice", "mig.nvidia.com").await;
    assert_eq!(node, h100, "the MIG claim lands on the H100 node");

    // Converged: unrelated node label changes cost the operator no write.
    wait_gpu_cluster_ready(&clusters).await;
    let from = Timestamp::now();
    change_unrelated_labels(&env, &operator, &gpus, Duration::from_secs(5)).await;
    let writes = operator_writes(&env, from);
    assert!(writes.is_empty(), "converged, yet: {writes:#?}");
    a_deleted_device_class_comes_back_in_one_write(&env).await;

    teardown_waits_for_claims(&env, &clusters).await;
    drop(operator);
}

/// The plugin's slices of every node of `dra_pool`, published with its pod-bound token there; the
/// T4 node's token is refused the H100 node's slice.
async fn publish_slices(
    env: &Env,
    nodes: &[k8s_openapi::api::core::v1::Node],
    dra_pool: &BTreeSet<String>,
    (h100, t4): (&str, &str),
) {
    publish_whole_gpus(env, nodes, dra_pool).await;
    let t4_client = dra::plugin_client(&env.client, &env.namespace, t4)
        .await
        .unwrap();
    // The API server enforces a policy a moment after it is written (its admission informer):
    // retried until refused. A write that got through (the same devices) is undone below.
    let foreign = dra::gpu_slice(h100, Profile::H100, None, 2).unwrap();
    let refused = wait_until("the admission policy in force", TIMEOUT, || async {
        Ok(dra::publish(&t4_client, &foreign).await.err())
    })
    .await
    .unwrap();
    assert!(
        refused
            .to_string()
            .contains(&format!("may not write the ResourceSlices of node {h100}")),
        "the admission policy refuses another node's slice: {refused}"
    );
    let own = dra::plugin_client(&env.client, &env.namespace, h100)
        .await
        .unwrap();
    let slice = dra::gpu_slice(h100, Profile::H100, None, 3).unwrap();
    dra::publish(&own, &slice).await.unwrap();
}

/// The positive control of the quiet window: the audit log shows the operator's writes. A
/// DeviceClass deleted by hand comes back, and that is the operator's one write of DeviceClasses.
async fn a_deleted_device_class_comes_back_in_one_write(env: &Env) {
    const CLASS: &str = "vfio.gpu.nvidia.com";
    let classes: Api<DynamicObject> = Api::all_with(
        env.client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("resource.k8s.io", "v1", "DeviceClass"),
            "deviceclasses",
        ),
    );
    let from = Timestamp::now();
    classes
        .delete(CLASS, &DeleteParams::default())
        .await
        .unwrap();
    let writes = wait_until("the DeviceClass written back", TIMEOUT, || async {
        let writes = operator_writes(env, from);
        let back = classes.get_opt(CLASS).await?.is_some();
        Ok((back && writes.iter().any(|w| w.resource == "deviceclasses")).then_some(writes))
    })
    .await
    .unwrap();
    let classes_written: Vec<_> = writes
        .iter()
        .filter(|w| w.resource == "deviceclasses")
        .collect();
    assert_eq!(classes_written.len(), 1, "{writes:#?}");
    assert_eq!(classes_written[0].name, CLASS, "{writes:#?}");
}

/// Deleting the GPUCluster waits while a claim holds a device of ours, naming it, and keeps the
/// kubelet plugin; once the claiming pods are gone, the kubelet plugin goes, then the GPUCluster.
async fn teardown_waits_for_claims(env: &Env, clusters: &Api<GpuCluster>) {
    clusters
        .delete(GPU_CLUSTER, &DeleteParams::default())
        .await
        .unwrap();
    let waiting = wait_until("the teardown waiting for claims", TIMEOUT, || async {
        let cluster = clusters.get(GPU_CLUSTER).await?;
        let ready = cluster
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.type_ == "Ready");
        Ok(ready.filter(|c| c.message.contains("whole-gpu")))
    })
    .await
    .unwrap();
    assert_eq!(waiting.status, "False", "{waiting:#?}");
    assert!(
        env.daemonsets()
            .get_opt(PLUGIN_DAEMONSET)
            .await
            .unwrap()
            .is_some(),
        "the kubelet plugin stays while a claim holds a device"
    );
    for pod in ["whole-gpu", "mig-slice"] {
        env.pods()
            .delete(pod, &DeleteParams::default().grace_period(0))
            .await
            .unwrap();
    }
    wait_until("the GPUCluster gone", TIMEOUT, || async {
        Ok(clusters.get_opt(GPU_CLUSTER).await?.is_none().then_some(()))
    })
    .await
    .unwrap();
    assert!(
        env.daemonsets()
            .get_opt(PLUGIN_DAEMONSET)
            .await
            .unwrap()
            .is_none()
            || env
                .pods()
                .list(&ListParams::default().labels(&format!("app={PLUGIN_DAEMONSET}")))
                .await
                .unwrap()
                .items
                .is_empty(),
        "the kubelet plugin is removed with the GPUCluster"
    );
}
