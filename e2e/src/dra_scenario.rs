//! What the DRA scenarios share: the GPUCluster they create, the pool label, their cleanup, the
//! waits on the kubelet plugin's pods and on the GPUCluster, the slices the plugin would publish,
//! and a pod claiming a GPU through a ResourceClaimTemplate.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::missing_panics_doc,
    reason = "test support: a step that cannot be taken fails the test that takes it"
)]

use std::collections::BTreeSet;

use gpu_operator_api::GpuCluster;
use gpu_operator_harness::{
    access::kubectl_ok,
    dra,
    fleet::{PROFILE_LABEL, Profile},
    wait_until,
};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::{
    Api, ResourceExt as _,
    api::{DynamicObject, PostParams},
    core::{ApiResource, GroupVersionKind},
};
use serde_json::json;

use crate::scenario::{Env, TIMEOUT, pods_of};

/// Our node label choosing the DRA pool when a ClusterPolicy is active too.
pub const RESOURCE_API: &str = "nvidia.com/gpu.resource-api";
/// The GPUCluster's one allowed name.
pub const GPU_CLUSTER: &str = "gpu-cluster";

/// Removes what a DRA scenario put outside its namespace, also when a step panics: the pool
/// labels of its nodes, the published slices, the GPUCluster (its finalizer too, should the
/// teardown step have failed).
pub struct DraCleanup(pub Vec<String>);

impl Drop for DraCleanup {
    fn drop(&mut self) {
        for node in &self.0 {
            let _ = kubectl_ok(&["label", "node", node, &format!("{RESOURCE_API}-")]);
        }
        let _ = kubectl_ok(&[
            "delete",
            "resourceslices",
            "--field-selector",
            &format!("spec.driver={}", dra::GPU_DRIVER),
            "--ignore-not-found",
        ]);
        let _ = kubectl_ok(&[
            "patch",
            "gpucluster",
            GPU_CLUSTER,
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":null}}"#,
        ]);
        let _ = kubectl_ok(&[
            "delete",
            "gpucluster",
            GPU_CLUSTER,
            "--ignore-not-found",
            "--wait=false",
        ]);
    }
}

/// The simulated GPU profile of node `name`.
pub fn profile_of(nodes: &[Node], name: &str) -> Profile {
    let node = nodes.iter().find(|n| n.name_any() == name).unwrap();
    node.labels()[PROFILE_LABEL].parse().unwrap()
}

/// Puts `nodes` in the DRA pool.
pub fn label_dra(nodes: &BTreeSet<String>) {
    for node in nodes {
        kubectl_ok(&[
            "label",
            "node",
            node,
            &format!("{RESOURCE_API}=dra"),
            "--overwrite",
        ])
        .unwrap();
    }
}

/// The nodes DaemonSet `name` has pods on.
pub async fn nodes_of(env: &Env, name: &str) -> BTreeSet<String> {
    pods_of(env, name).await.into_keys().collect()
}

/// Waits until DaemonSet `name` has pods on exactly `nodes`.
pub async fn wait_pods_on(env: &Env, name: &str, nodes: &BTreeSet<String>) {
    let result = wait_until(&format!("{name} on {nodes:?}"), TIMEOUT, || async {
        Ok((nodes_of(env, name).await == *nodes).then_some(()))
    })
    .await;
    if let Err(error) = result {
        panic!("{error}; pods on {:?}", nodes_of(env, name).await);
    }
}

/// The GPUCluster the scenarios create: NVIDIA's DRA driver image, every other field defaulted.
pub fn gpu_cluster() -> GpuCluster {
    serde_json::from_value(json!({
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "GPUCluster",
        "metadata": {"name": GPU_CLUSTER},
        "spec": {"draDriver": {
            "repository": "nvcr.io/nvidia", "image": "dra-driver-nvidia-gpu", "version": "v0.5.0"
        }},
    }))
    .unwrap()
}

/// Waits until the GPUCluster's `status.state` is `ready`.
pub async fn wait_gpu_cluster_ready(clusters: &Api<GpuCluster>) {
    wait_until("the GPUCluster ready", TIMEOUT, || async {
        let cluster = clusters.get(GPU_CLUSTER).await?;
        Ok(cluster
            .status
            .is_some_and(|s| s.state.as_str() == "ready")
            .then_some(()))
    })
    .await
    .unwrap();
}

/// Publishes, for every node of `pool`, the slice its kubelet plugin would: its whole GPUs, with
/// the plugin's pod-bound token there.
pub async fn publish_whole_gpus(env: &Env, nodes: &[Node], pool: &BTreeSet<String>) {
    for node in pool {
        let client = dra::plugin_client(&env.client, &env.namespace, node)
            .await
            .unwrap();
        let slice = dra::gpu_slice(node, profile_of(nodes, node), None, 1).unwrap();
        dra::publish(&client, &slice).await.unwrap();
    }
}

fn claim_template_kind() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("resource.k8s.io", "v1", "ResourceClaimTemplate"),
        "resourceclaimtemplates",
    )
}

/// A ResourceClaimTemplate `name` of one device of DeviceClass `class`.
pub fn claim_template(name: &str, class: &str) -> DynamicObject {
    let mut template = DynamicObject::new(name, &claim_template_kind());
    template.data = json!({"spec": {"spec": {"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": class, "count": 1}}
    ]}}}});
    template
}

/// A pod `name` whose one container claims a device through the ResourceClaimTemplate `template`.
pub fn claiming_pod(name: &str, template: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
            "containers": [{
                "name": "cuda", "image": "nvcr.io/nvidia/cuda:12.9.1-base-ubi9",
                "resources": {"claims": [{"name": "gpu"}]}
            }],
        },
    }))
    .unwrap()
}

/// Creates a claim template of `class` and a pod claiming from it in the scenario's namespace;
/// waits until the scheduler placed the pod and returns its node.
pub async fn claim_and_schedule(env: &Env, name: &str, class: &str) -> String {
    let templates: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.namespace, &claim_template_kind());
    templates
        .create(&PostParams::default(), &claim_template(name, class))
        .await
        .unwrap();
    env.pods()
        .create(&PostParams::default(), &claiming_pod(name, name))
        .await
        .unwrap();
    wait_until(&format!("pod {name} scheduled"), TIMEOUT, || async {
        let pod = env.pods().get(name).await?;
        Ok(pod.spec.and_then(|s| s.node_name))
    })
    .await
    .unwrap()
}
