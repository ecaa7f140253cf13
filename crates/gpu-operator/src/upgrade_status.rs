//! `gpu-operator upgrade status`: the driver upgrade as a table of GPU nodes by state (with their
//! cordon, time in state and failure reason), then the `DriverUpgrade` condition of the active
//! ClusterPolicy, which names the stuck nodes and why. Read-only.

use std::{path::Path, sync::Arc};

use anyhow::Context as _;
use gpu_operator_api::{ClusterPolicy, conditions::DRIVER_UPGRADE, labels};
use gpu_operator_driver_upgrade::view::{self, OperandPod, Templates, UpgradeNode};
use k8s_openapi::{api::apps::v1::DaemonSet, jiff::Timestamp};
use kube::{Api, api::ListParams};

/// Prints the upgrade status of the cluster.
pub fn main(kubeconfig: Option<&Path>, namespace: &str) -> anyhow::Result<()> {
    tokio::runtime::Runtime::new()
        .context("starting the async runtime")?
        .block_on(run(kubeconfig, namespace))
}

async fn run(kubeconfig: Option<&Path>, namespace: &str) -> anyhow::Result<()> {
    let client = gpu_operator_process::config::client(kubeconfig).await?;
    let gpu_nodes = ListParams::default().labels(&format!("{}=true", labels::GPU_PRESENT));
    let nodes: Vec<Arc<UpgradeNode>> = Api::<UpgradeNode>::all(client.clone())
        .list(&gpu_nodes)
        .await
        .context("listing the GPU nodes")?
        .items
        .into_iter()
        .map(Arc::new)
        .collect();
    let pod_api = Api::<OperandPod>::namespaced(client.clone(), namespace);
    let mut pods: Vec<Arc<OperandPod>> = Vec::new();
    for selector in [
        view::operand_pods_selector(),
        view::pool_driver_pods_selector(),
    ] {
        let list = pod_api
            .list(&ListParams::default().labels(&selector))
            .await
            .with_context(|| {
                format!("listing the driver pods in namespace {namespace} (--namespace)")
            })?;
        pods.extend(list.items.into_iter().map(Arc::new));
    }
    let daemonsets: Vec<Arc<DaemonSet>> = Api::<DaemonSet>::namespaced(client.clone(), namespace)
        .list(&ListParams::default().labels(&view::driver_daemonsets_selector()))
        .await
        .context("listing the driver DaemonSets")?
        .items
        .into_iter()
        .map(Arc::new)
        .collect();
    let policies: Vec<Arc<ClusterPolicy>> = Api::<ClusterPolicy>::all(client)
        .list(&ListParams::default())
        .await
        .context("listing ClusterPolicies")?
        .items
        .into_iter()
        .map(Arc::new)
        .collect();
    let active = gpu_operator_core::pipeline::active::active(&policies);
    let condition = active.as_ref().and_then(|p| {
        p.status
            .as_ref()?
            .conditions
            .as_ref()?
            .iter()
            .find(|c| c.type_ == DRIVER_UPGRADE)
            .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
    });
    let templates = Templates::new(&daemonsets);
    let facts = view::node_facts(&nodes, &pods, &templates, true);
    let condition = condition
        .as_ref()
        .map(|(s, r, m)| (s.as_str(), r.as_str(), m.as_str()));
    print!(
        "{}",
        gpu_operator_driver_upgrade::report::table(&facts, condition, Timestamp::now())
    );
    if condition.is_none() {
        println!("\nno DriverUpgrade condition yet: is the operator running with a ClusterPolicy?");
    }
    Ok(())
}
