//! DRA below the kubelet-plugin boundary: the ResourceSlices the NVIDIA DRA driver's `gpus`
//! kubelet plugin publishes for a node, built from the node's simulated GPUs, and published the
//! way the plugin does — with a token of its ServiceAccount bound to its pod on that node, so the
//! API server's admission policy sees the node the write comes from. Kwok runs no kubelet plugin;
//! what the plugin would publish is simulated here, as GPUs are simulated below NVML.

use anyhow::Context as _;
use k8s_openapi::api::{
    authentication::v1::TokenRequest,
    core::v1::{Pod, ServiceAccount},
};
use kube::{
    Api,
    api::{DeleteParams, DynamicObject, ListParams, PostParams},
    core::{ApiResource, GroupVersionKind},
};
use serde_json::{Value, json};

use crate::{access::client_with_token, fleet::Profile};

/// The driver name of the DRA driver's GPU devices.
pub const GPU_DRIVER: &str = "gpu.nvidia.com";
/// The kubelet plugin's ServiceAccount, as the GPUCluster deploys it.
pub const PLUGIN_SERVICE_ACCOUNT: &str = "nvidia-dra-driver-kubeletplugin";
/// The kubelet plugin's DaemonSet, as the GPUCluster deploys it.
pub const PLUGIN_DAEMONSET: &str = "nvidia-dra-driver-kubelet-plugin";
/// The driver version the simulated nodes report.
pub const DRIVER_VERSION: &str = "580.95.5";

/// The `resource.k8s.io/v1` ResourceSlice kind, for dynamic access.
pub fn resource_slice_kind() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("resource.k8s.io", "v1", "ResourceSlice"),
        "resourceslices",
    )
}

/// The ResourceSlice the `gpus` kubelet plugin publishes for node `node` of `profile`: one pool
/// named after the node, one slice, a `gpu` device per GPU — or, with `mig_profile` (such as
/// `1g.10gb`) on a MIG-capable node, `per_gpu` MIG devices of that profile per GPU instead.
/// `None` for a node without GPUs.
pub fn gpu_slice(
    node: &str,
    profile: Profile,
    mig: Option<(&str, u32)>,
    generation: i64,
) -> Option<Value> {
    let labels = profile.labels(node);
    let count = profile.gpu_count();
    if count == 0 {
        return None;
    }
    let label = |key: &str| labels.get(key).cloned().unwrap_or_default();
    let product = label("nvidia.com/gpu.product");
    let architecture = capitalized(&label("nvidia.com/gpu.family"));
    let compute = format!(
        "{}.{}.0",
        label("nvidia.com/gpu.compute.major"),
        label("nvidia.com/gpu.compute.minor")
    );
    let memory = format!("{}Mi", label("nvidia.com/gpu.memory"));
    let mut devices = Vec::new();
    for index in 0..count {
        let uuid = format!("GPU-{node}-{index}");
        let common = json!({
            "uuid": {"string": uuid},
            "productName": {"string": product},
            "brand": {"string": "Nvidia"},
            "architecture": {"string": architecture},
            "cudaComputeCapability": {"version": compute},
            "driverVersion": {"version": DRIVER_VERSION},
            "index": {"int": index},
        });
        match mig.filter(|_| profile.mig_capable()) {
            None => {
                let mut attributes = common;
                attributes["type"] = json!({"string": "gpu"});
                devices.push(json!({
                    "name": format!("gpu-{index}"),
                    "attributes": attributes,
                    "capacity": {"memory": {"value": memory}},
                }));
            }
            Some((mig_profile, per_gpu)) => {
                for instance in 0..per_gpu {
                    let mut attributes = common.clone();
                    attributes["type"] = json!({"string": "mig"});
                    attributes["uuid"] =
                        json!({"string": format!("MIG-{node}-{index}-{instance}")});
                    attributes["parentUUID"] = json!({"string": uuid});
                    attributes["profile"] = json!({"string": mig_profile});
                    devices.push(json!({
                        "name": format!("gpu-{index}-mig-{}-{instance}", mig_profile.replace('.', "")),
                        "attributes": attributes,
                    }));
                }
            }
        }
    }
    Some(json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": format!("{node}-{GPU_DRIVER}")},
        "spec": {
            "driver": GPU_DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
            "devices": devices,
        },
    }))
}

fn capitalized(word: &str) -> String {
    let mut chars = word.chars();
    chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// A client authenticated as the kubelet plugin on `node`: a token of its ServiceAccount bound
/// to its pod there (DaemonSet [`PLUGIN_DAEMONSET`] in `namespace`), which carries the node's
/// name for the admission policy.
pub async fn plugin_client(
    admin: &kube::Client,
    namespace: &str,
    node: &str,
) -> anyhow::Result<kube::Client> {
    let pods: Api<Pod> = Api::namespaced(admin.clone(), namespace);
    let pod = pods
        .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
        .await?
        .items
        .into_iter()
        .find(|pod| {
            pod.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|owner| owner.kind == "DaemonSet" && owner.name == PLUGIN_DAEMONSET)
        })
        .with_context(|| format!("no {PLUGIN_DAEMONSET} pod on node {node}"))?;
    let request: TokenRequest = serde_json::from_value(json!({"spec": {
        "audiences": [],
        "expirationSeconds": 3600,
        "boundObjectRef": {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": pod.metadata.name,
            "uid": pod.metadata.uid,
        },
    }}))?;
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), namespace);
    let token = accounts
        .create_token_request(PLUGIN_SERVICE_ACCOUNT, &PostParams::default(), &request)
        .await
        .with_context(|| format!("requesting a pod-bound token of {PLUGIN_SERVICE_ACCOUNT}"))?
        .status
        .context("TokenRequest returned no token")?
        .token;
    client_with_token(&token).await
}

/// Publishes `slice` with `client` as the plugin does: created, or updated over the live one
/// (the plugin's role grants create and update, not patch).
pub async fn publish(client: &kube::Client, slice: &Value) -> Result<(), kube::Error> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource_slice_kind());
    let name = slice["metadata"]["name"].as_str().unwrap_or_default();
    let object: DynamicObject =
        serde_json::from_value(slice.clone()).map_err(kube::Error::SerdeError)?;
    match api.create(&PostParams::default(), &object).await {
        Err(kube::Error::Api(status)) if status.code == 409 => {
            let live = api.get(name).await?;
            let mut object = object;
            object.metadata.resource_version = live.metadata.resource_version;
            api.replace(name, &PostParams::default(), &object).await?;
            Ok(())
        }
        result => result.map(|_| ()),
    }
}

/// Deletes every ResourceSlice of the GPU driver (as the plugin's cleanup does), with `admin`.
pub async fn remove_all(admin: &kube::Client) -> anyhow::Result<()> {
    let api: Api<DynamicObject> = Api::all_with(admin.clone(), &resource_slice_kind());
    api.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().fields(&format!("spec.driver={GPU_DRIVER}")),
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_h100_node_publishes_eight_gpus_or_their_mig_devices() {
        let slice = gpu_slice("h100-0", Profile::H100, None, 1).unwrap();
        let devices = slice["spec"]["devices"].as_array().unwrap();
        assert_eq!(devices.len(), 8);
        assert_eq!(devices[0]["attributes"]["type"]["string"], "gpu");
        assert_eq!(devices[0]["attributes"]["architecture"]["string"], "Hopper");
        assert_eq!(slice["spec"]["pool"]["name"], "h100-0");
        let mig = gpu_slice("h100-0", Profile::H100, Some(("1g.10gb", 7)), 2).unwrap();
        let devices = mig["spec"]["devices"].as_array().unwrap();
        assert_eq!(devices.len(), 56);
        assert_eq!(devices[0]["attributes"]["type"]["string"], "mig");
        assert_eq!(
            devices[0]["attributes"]["parentUUID"]["string"],
            "GPU-h100-0-0"
        );
        assert!(
            gpu_slice("t4-0", Profile::T4, Some(("1g.10gb", 7)), 1).unwrap()["spec"]["devices"][0]
                ["attributes"]["type"]["string"]
                == "gpu",
            "no MIG on a T4"
        );
        assert!(gpu_slice("cpu-0", Profile::Cpu, None, 1).is_none());
    }
}
