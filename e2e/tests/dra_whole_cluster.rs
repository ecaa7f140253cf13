//! The whole-cluster switch from a ClusterPolicy to a GPUCluster, as the DRA guide documents it,
//! with the real kube-scheduler: a running ClusterPolicy installation; a GPUCluster created beside
//! it; every GPU node labelled `nvidia.com/gpu.resource-api=dra`; then the ClusterPolicy deleted.
//! The device plugin leaves every GPU node and the kubelet plugin comes to every one; a pod
//! claims a GPU through DRA; what does not depend on the resource API (the container toolkit,
//! GPU Feature Discovery) is never restarted by the switch; deleting the ClusterPolicy restarts
//! nothing of the DRA stack, removes no pool label or DRA gate, and evicts nothing: the claiming
//! pod keeps its node and its allocated claim, and the GPUCluster stays ready. Uninstalling with
//! `operator.cleanupCRD` then stops at the GPUCluster's teardown while the pod holds its claim:
//! its hook deletes no CRD and names the pod.
#![cfg(feature = "e2e")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::large_futures
)]

use std::collections::BTreeSet;

use gpu_operator_api::{ClusterPolicy, ClusterPolicySpec, GpuCluster};
use gpu_operator_e2e::{
    dra_scenario::{
        DraCleanup, GPU_CLUSTER, claim_and_schedule, gpu_cluster, label_dra, nodes_of,
        publish_whole_gpus, wait_gpu_cluster_ready, wait_pods_on,
    },
    scenario as support,
};
use gpu_operator_harness::{
    access::kubectl_ok, dra::PLUGIN_DAEMONSET, operator::workspace_binary, wait_until,
};
use k8s_openapi::api::{core::v1::Node, resource::v1::ResourceClaim};
use kube::{
    Api, ResourceExt as _,
    api::{DeleteParams, PostParams},
};

use support::{Cleanup, IMAGES, PLUGIN, TIMEOUT, gpu_nodes, pods_of, setup, simulated_nodes};

/// The ClusterPolicy's operands whose pods do not depend on the resource API of their node.
const UNAFFECTED: [&str; 2] = [
    "nvidia-container-toolkit-daemonset",
    "gpu-feature-discovery",
];
/// The deploy gate of the DRA kubelet plugin.
const DRA_DRIVER_GATE: &str = "nvidia.com/gpu.deploy.dra-driver";

#[tokio::test]
async fn a_whole_cluster_moves_from_the_device_plugin_to_dra() {
    let env = setup().await;
    let _cleanup = Cleanup {
        namespace: env.namespace.clone(),
        policies: vec![env.namespace.clone()],
    };
    let nodes = simulated_nodes(&env.client).await;
    let gpus: BTreeSet<String> = gpu_nodes(&nodes).into_iter().collect();
    let _dra_cleanup = DraCleanup(gpus.iter().cloned().collect());
    let operator = env.start(&IMAGES);
    let policy = ClusterPolicy::new(&env.namespace, ClusterPolicySpec::default());
    env.policies()
        .create(&PostParams::default(), &policy)
        .await
        .unwrap();
    wait_pods_on(&env, PLUGIN, &gpus).await;
    for name in UNAFFECTED {
        wait_pods_on(&env, name, &gpus).await;
    }
    let before: Vec<_> = futures::future::join_all(UNAFFECTED.map(|n| pods_of(&env, n))).await;

    // The GPUCluster beside the ClusterPolicy takes no node until the nodes are labelled.
    let clusters: Api<GpuCluster> = Api::all(env.client.clone());
    clusters
        .create(&PostParams::default(), &gpu_cluster())
        .await
        .unwrap();
    label_dra(&gpus);
    wait_pods_on(&env, PLUGIN_DAEMONSET, &gpus).await;
    wait_pods_on(&env, PLUGIN, &BTreeSet::new()).await;
    publish_whole_gpus(&env, &nodes, &gpus).await;
    let node = claim_and_schedule(&env, "steady", "gpu.nvidia.com").await;
    assert!(gpus.contains(&node), "allocated on {node}");
    wait_gpu_cluster_ready(&clusters).await;
    let after: Vec<_> = futures::future::join_all(UNAFFECTED.map(|n| pods_of(&env, n))).await;
    assert_eq!(before, after, "the switch restarted none of {UNAFFECTED:?}");

    // The ClusterPolicy goes: the DRA stack and the workload stay as they are.
    let plugins = pods_of(&env, PLUGIN_DAEMONSET).await;
    let claim = claim_of(&env, "steady").await;
    env.policies()
        .delete(&env.namespace, &DeleteParams::default())
        .await
        .unwrap();
    wait_until("the ClusterPolicy's operands gone", TIMEOUT, || async {
        let gone = env.policies().get_opt(&env.namespace).await?.is_none()
            && nodes_of(&env, UNAFFECTED[0]).await.is_empty();
        Ok(gone.then_some(()))
    })
    .await
    .unwrap();
    wait_gpu_cluster_ready(&clusters).await;
    assert_eq!(
        pods_of(&env, PLUGIN_DAEMONSET).await,
        plugins,
        "the kubelet plugin is not restarted"
    );
    assert!(nodes_of(&env, PLUGIN).await.is_empty(), "no device plugin");
    let pod = env.pods().get("steady").await.unwrap();
    assert!(pod.metadata.deletion_timestamp.is_none(), "not evicted");
    assert_eq!(pod.spec.and_then(|s| s.node_name).as_deref(), Some(&*node));
    let still = claim_of(&env, "steady").await;
    assert_eq!(still.uid(), claim.uid(), "the same claim");
    assert!(
        still.status.and_then(|s| s.allocation).is_some(),
        "still allocated"
    );
    let nodes: Api<Node> = Api::all(env.client.clone());
    for name in &gpus {
        let labels = nodes.get(name).await.unwrap().metadata.labels.unwrap();
        assert_eq!(
            labels.get(DRA_DRIVER_GATE).map(String::as_str),
            Some("true")
        );
    }

    // Uninstalling with `operator.cleanupCRD` while the workload runs: the hook's command gives
    // up on the teardown, naming the pod, and deletes no CRD.
    let hook = crds_delete();
    assert!(
        !hook.status.success(),
        "the hook fails while a claim is held"
    );
    let said = String::from_utf8_lossy(&hook.stderr);
    assert!(
        said.contains("still being torn down") && said.contains("steady"),
        "{said}"
    );
    kubectl_ok(&[
        "get",
        "crd",
        "gpuclusters.nvidia.com",
        "clusterpolicies.nvidia.com",
    ])
    .unwrap();

    // Done: the workload goes, then the GPUCluster.
    env.pods()
        .delete("steady", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    wait_until("the GPUCluster gone", TIMEOUT, || async {
        Ok(clusters.get_opt(GPU_CLUSTER).await?.is_none().then_some(()))
    })
    .await
    .unwrap();
    drop(operator);
}

/// `gpu-operator crds delete`, as the chart's `operator.cleanupCRD` hook runs it, with a short
/// teardown timeout.
fn crds_delete() -> std::process::Output {
    std::process::Command::new(workspace_binary("gpu-operator"))
        .args(["crds", "delete", "--teardown-timeout", "15"])
        .output()
        .unwrap()
}

/// The ResourceClaim the scheduler allocated for pod `pod`'s one claim.
async fn claim_of(env: &support::Env, pod: &str) -> ResourceClaim {
    let claims: Api<ResourceClaim> = Api::namespaced(env.client.clone(), &env.namespace);
    wait_until(&format!("the claim of {pod}"), TIMEOUT, || async {
        let pod = env.pods().get(pod).await?;
        let Some(name) = pod
            .status
            .and_then(|s| s.resource_claim_statuses)
            .and_then(|c| c.into_iter().next())
            .and_then(|c| c.resource_claim_name)
        else {
            return Ok(None);
        };
        Ok(claims.get_opt(&name).await?)
    })
    .await
    .unwrap()
}
