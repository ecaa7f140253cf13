//! `--dra`: a GPUCluster beside the ClusterPolicy, with the DRA driver on a third of the GPU
//! nodes. Before the ClusterPolicy is created the bench labels every third GPU node
//! `nvidia.com/gpu.resource-api=dra` (the bench's own writes, not the operator's) and creates
//! the GPUCluster `gpu-cluster`. While the run waits for ready, it publishes the ResourceSlices
//! of each DRA node whose kubelet plugin pod exists, as the plugin would once running (the
//! cluster's writes, under the admin user). A run is ready once the ClusterPolicy and the
//! GPUCluster say `ready` and the DaemonSets cover their pools: the device plugin and the
//! validator the other GPU nodes, the kubelet plugin and the DRA validator the DRA nodes.

use std::collections::BTreeSet;

use futures::{StreamExt as _, TryStreamExt as _, stream};
use gpu_operator_api::GpuCluster;
use gpu_operator_harness::{
    dra::{self, PLUGIN_DAEMONSET},
    fleet::{KWOK_LABEL, NFD_NVIDIA_PCI, PROFILE_LABEL, Profile},
};
use k8s_openapi::api::{
    apps::v1::DaemonSet,
    core::v1::{Node, Pod},
};
use kube::{
    Api, ResourceExt as _,
    api::{ListParams, PostParams},
};
use serde::Serialize;
use serde_json::json;

use super::run::CONTAINER_DAEMONSETS;

/// Our node label choosing the DRA pool beside a ClusterPolicy.
const RESOURCE_API: &str = "nvidia.com/gpu.resource-api";
/// The DRA validator's DaemonSet.
const DRA_VALIDATOR: &str = "nvidia-dra-validator";
/// The GPUCluster's one name.
const GPU_CLUSTER: &str = "gpu-cluster";
/// Requests sent at once.
const CONCURRENT: usize = 16;

/// Which GPU nodes run which stack.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pools {
    /// GPU nodes of the device plugin.
    pub plugin: BTreeSet<String>,
    /// GPU nodes of the DRA driver.
    pub dra: BTreeSet<String>,
    /// DRA nodes whose ResourceSlice the bench published.
    published: BTreeSet<String>,
}

impl Pools {
    /// Every third of the `gpu_nodes` (by name) a DRA node, the rest device plugin nodes.
    pub fn split(gpu_nodes: &[String]) -> Self {
        let mut names: Vec<&String> = gpu_nodes.iter().collect();
        names.sort();
        let mut pools = Self::default();
        for (i, name) in names.into_iter().enumerate() {
            let pool = if i % 3 == 2 {
                &mut pools.dra
            } else {
                &mut pools.plugin
            };
            pool.insert(name.clone());
        }
        pools
    }

    /// Each DaemonSet and the number of nodes it should have a ready pod on: the device plugin
    /// on its pool, the ClusterPolicy's validator on every GPU node (the DRA nodes too: it
    /// validates the driver and toolkit there), the DRA DaemonSets on the DRA pool.
    fn wanted(&self) -> Vec<(&'static str, usize)> {
        let [plugin, validator] = CONTAINER_DAEMONSETS;
        let mut wanted = vec![
            (plugin, self.plugin.len()),
            (validator, self.plugin.len() + self.dra.len()),
        ];
        wanted.extend([
            (PLUGIN_DAEMONSET, self.dra.len()),
            (DRA_VALIDATOR, self.dra.len()),
        ]);
        wanted
    }
}

/// What the DRA profile measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct DraRun {
    /// GPU nodes labelled for DRA before the ClusterPolicy was created.
    pub dra_nodes: u32,
    /// GPU nodes left to the device plugin.
    pub plugin_nodes: u32,
}

/// Labels a third of the simulated GPU nodes for DRA (see [`Pools::split`]) and creates the
/// GPUCluster.
pub async fn prepare(client: &kube::Client, out: &mut DraRun) -> anyhow::Result<Pools> {
    let selector = format!("{}={},{NFD_NVIDIA_PCI}=true", KWOK_LABEL.0, KWOK_LABEL.1);
    let names: Vec<String> = Api::<Node>::all(client.clone())
        .list_metadata(&ListParams::default().labels(&selector))
        .await?
        .items
        .iter()
        .map(kube::ResourceExt::name_any)
        .collect();
    let pools = Pools::split(&names);
    super::sandbox::label(client, &pools.dra, (RESOURCE_API, "dra")).await?;
    out.dra_nodes = u32::try_from(pools.dra.len())?;
    out.plugin_nodes = u32::try_from(pools.plugin.len())?;
    eprintln!(
        "    dra: {} GPU nodes for DRA, {} for the device plugin",
        out.dra_nodes, out.plugin_nodes
    );
    let cluster: GpuCluster = serde_json::from_value(json!({
        "apiVersion": "nvidia.com/v1alpha1", "kind": "GPUCluster",
        "metadata": {"name": GPU_CLUSTER},
        "spec": {"draDriver": {
            "repository": "nvcr.io/nvidia", "image": "dra-driver-nvidia-gpu", "version": "v0.5.0"
        }},
    }))?;
    Api::<GpuCluster>::all(client.clone())
        .create(&PostParams::default(), &cluster)
        .await?;
    Ok(pools)
}

/// Publishes the ResourceSlice of each DRA node that has a kubelet plugin pod and none yet, then
/// says whether the GPUCluster is `ready` and the DaemonSets cover their pools.
pub async fn ready(
    client: &kube::Client,
    daemonsets: &Api<DaemonSet>,
    pools: &mut Pools,
) -> anyhow::Result<bool> {
    publish_new(client, daemonsets, pools).await?;
    let state = Api::<GpuCluster>::all(client.clone())
        .get(GPU_CLUSTER)
        .await?
        .status
        .map(|s| s.state.as_str());
    if state != Some("ready") {
        return Ok(false);
    }
    for (name, want) in pools.wanted() {
        let want = i32::try_from(want)?;
        let Some(ds) = daemonsets.get_opt(name).await? else {
            return Ok(want == 0);
        };
        let status = ds.status.unwrap_or_default();
        if status.desired_number_scheduled != want || status.number_ready != want {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The slices of the DRA nodes with a kubelet plugin pod not published yet.
async fn publish_new(
    client: &kube::Client,
    daemonsets: &Api<DaemonSet>,
    pools: &mut Pools,
) -> anyhow::Result<()> {
    if daemonsets.get_opt(PLUGIN_DAEMONSET).await?.is_none() {
        return Ok(());
    }
    let pods: Api<Pod> = Api::all(client.clone());
    let with_plugin: BTreeSet<String> = pods
        .list(&ListParams::default().labels(&format!("app={PLUGIN_DAEMONSET}")))
        .await?
        .items
        .into_iter()
        .filter_map(|pod| pod.spec.and_then(|s| s.node_name))
        .filter(|node| !pools.published.contains(node))
        .collect();
    let nodes: Api<Node> = Api::all(client.clone());
    let slices = stream::iter(with_plugin)
        .map(|name| {
            let nodes = &nodes;
            async move {
                let node = nodes.get_metadata(&name).await?;
                let profile: Profile = node
                    .labels()
                    .get(PROFILE_LABEL)
                    .map_or(Ok(Profile::H100), |p| p.parse())?;
                if let Some(slice) = dra::gpu_slice(&name, profile, None, 1) {
                    dra::publish(client, &slice).await?;
                }
                anyhow::Ok(name)
            }
        })
        .buffer_unordered(CONCURRENT)
        .try_collect::<Vec<String>>()
        .await?;
    pools.published.extend(slices);
    Ok(())
}

/// The step's line in the Markdown report.
pub fn line(nodes: u32, run: &DraRun) -> String {
    format!(
        "- {nodes} nodes, dra: {} GPU nodes on DRA beside {} on the device plugin (ready: the \
         ClusterPolicy and the GPUCluster `ready`, each DaemonSet on its pool)",
        run.dra_nodes, run.plugin_nodes,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_third_gpu_node_is_a_dra_node() {
        let names: Vec<String> = (0..9).map(|i| format!("gpu-{i}")).collect();
        let pools = Pools::split(&names);
        assert_eq!(
            pools.dra,
            ["gpu-2", "gpu-5", "gpu-8"].map(str::to_owned).into()
        );
        assert_eq!(pools.plugin.len(), 6);
        let wanted = pools.wanted();
        assert!(wanted.contains(&(PLUGIN_DAEMONSET, 3)) && wanted.contains(&(DRA_VALIDATOR, 3)));
        assert!(wanted.contains(&("nvidia-device-plugin-daemonset", 6)));
        assert!(wanted.contains(&("nvidia-operator-validator", 9)));
        let run = DraRun {
            dra_nodes: 3,
            plugin_nodes: 6,
        };
        assert!(line(10, &run).contains("3 GPU nodes on DRA beside 6"));
    }
}
