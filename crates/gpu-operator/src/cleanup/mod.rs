//! `gpu-operator cleanup-node-labels`: takes off every node what the operator and its agents
//! wrote there, for the chart's `operator.cleanupNodeLabels` uninstall hook (on by default): the
//! node labeller's labels, the driver upgrade's state label, annotations and cordon, the
//! validator's conditions and summary annotation, the discovery agent's labels, and
//! `gpu.deploy.*` labels left paused by an operand. What a person or another component wrote
//! stays; [`plan`] decides, by field manager and by the keys we own.

mod plan;

use std::path::Path;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Node;
use kube::{
    Api, ResourceExt as _,
    api::{ListParams, Patch, PatchParams},
};

/// Field manager of the cleanup patches.
const FIELD_MANAGER: &str = "gpu-operator/cleanup";
/// Nodes per list page.
const PAGE: u32 = 500;

/// Cleans every node; prints what it removed.
pub fn main(kubeconfig: Option<&Path>) -> anyhow::Result<()> {
    tokio::runtime::Runtime::new()
        .context("starting the async runtime")?
        .block_on(run(kubeconfig))
}

async fn run(kubeconfig: Option<&Path>) -> anyhow::Result<()> {
    let api: Api<Node> = Api::all(gpu_operator_process::config::client(kubeconfig).await?);
    let (mut nodes, mut cleaned) = (0_usize, 0_usize);
    let mut params = ListParams::default().limit(PAGE);
    loop {
        let page = api.list(&params).await.context("listing nodes")?;
        for node in &page.items {
            nodes += 1;
            let cleanup = plan::node_cleanup(node);
            if cleanup.is_empty() {
                continue;
            }
            apply(&api, &node.name_any(), &cleanup).await?;
            cleaned += 1;
            println!("node {}: removed {}", node.name_any(), cleanup.describe());
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => break,
        }
    }
    println!("removed what the operator wrote from {cleaned} of {nodes} nodes");
    Ok(())
}

/// Sends the node's patches: its metadata and cordon, then its status (conditions).
async fn apply(api: &Api<Node>, name: &str, cleanup: &plan::NodeCleanup) -> anyhow::Result<()> {
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    if let Some(patch) = cleanup.node_patch() {
        gone_is_fine(api.patch(name, &params, &Patch::Merge(&patch)).await).with_context(|| {
            format!("removing the operator's labels and annotations of node {name}")
        })?;
    }
    if let Some(patch) = cleanup.status_patch() {
        gone_is_fine(
            api.patch_status(name, &params, &Patch::Strategic(&patch))
                .await,
        )
        .with_context(|| format!("removing the validator's conditions of node {name}"))?;
    }
    Ok(())
}

/// A node deleted meanwhile needs no cleanup.
fn gone_is_fine(result: Result<Node, kube::Error>) -> Result<(), kube::Error> {
    match result {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
        Err(error) => Err(error),
    }
}
