//! `cargo xtask demo`: the operator's main job on the local cluster. For now it brings the cluster up
//! with its simulated GPU fleet and shows the nodes; installing the chart comes with the chart issue.

use clap::Args as ClapArgs;
use k8s_openapi::api::core::v1::Node;

use crate::cluster::{self, Layout, UpArgs};

/// Options of `cargo xtask demo`.
#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Stop the demo cluster and delete its state.
    #[arg(long)]
    pub down: bool,
    /// Cluster options (`--nodes`, `--fleet`).
    #[command(flatten)]
    pub up: UpArgs,
}

/// Runs the demo (see the module docs).
pub fn run(args: &Args) -> anyhow::Result<()> {
    let layout = Layout::from_env()?;
    if args.down {
        return cluster::down(&layout);
    }
    if cluster::is_up(&layout) {
        eprintln!("==> the local cluster is already up; showing it");
    } else {
        cluster::run(cluster::Action::Up(args.up.clone()))?;
    }
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(show_nodes(&layout))?;
    println!(
        "\nnext:\n  {}\n  kubectl get nodes -L nvidia.com/gpu.product,nvidia.com/mig.capable\n  cargo xtask demo --down    # stop everything",
        cluster::env_lines(&layout).replace('\n', "\n  ")
    );
    Ok(())
}

async fn show_nodes(layout: &Layout) -> anyhow::Result<()> {
    let client = gpu_operator_e2e::harness::client_for(&layout.kubeconfig()).await?;
    let nodes: kube::Api<Node> = kube::Api::all(client);
    let list = nodes.list(&kube::api::ListParams::default()).await?;
    println!(
        "\n{:<16} {:<8} {:>4}  {:<24} {:<22} {:<6}",
        "NODE", "PROFILE", "GPUS", "PRODUCT", "RUNTIME", "READY"
    );
    for node in &list.items {
        let labels = node.metadata.labels.clone().unwrap_or_default();
        let label = |key: &str| labels.get(key).cloned().unwrap_or_else(|| "-".to_owned());
        let status = node.status.clone().unwrap_or_default();
        let gpus = status
            .capacity
            .as_ref()
            .and_then(|c| c.get("nvidia.com/gpu"))
            .map_or_else(|| "0".to_owned(), |q| q.0.clone());
        let runtime = status
            .node_info
            .as_ref()
            .map(|i| i.container_runtime_version.clone())
            .unwrap_or_default();
        println!(
            "{:<16} {:<8} {:>4}  {:<24} {:<22} {:<6}",
            node.metadata.name.clone().unwrap_or_default(),
            label(gpu_operator_e2e::fleet::PROFILE_LABEL),
            gpus,
            label("nvidia.com/gpu.product"),
            runtime,
            cluster::node_is_ready(node),
        );
    }
    Ok(())
}
