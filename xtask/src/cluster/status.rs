//! `cluster status`: which components run, on which ports, with how many (Ready) nodes.

use gpu_operator_harness::fleet::KWOK_LABEL;
use k8s_openapi::api::core::v1::Node;

use super::{Layout, components::Component, nodes, running_pid};

/// Prints the cluster's state; says how to start one when none runs.
pub fn print(layout: &Layout) -> anyhow::Result<()> {
    if !super::is_up(layout) {
        println!("no local cluster is running: start one with `cargo xtask cluster up`");
        return Ok(());
    }
    println!("local cluster ({})", layout.run_dir().display());
    for component in Component::ALL {
        let ports: Vec<String> = component
            .ports(layout)
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        let state = match running_pid(layout, component) {
            Some(pid) => format!("running  pid {pid:<8} rss {:>7}", rss(pid)),
            None => "STOPPED  (see its log)".to_owned(),
        };
        println!(
            "  {:<24} {state}  {}  log {}",
            component.name(),
            ports.join(", "),
            layout.log(component.name()).display()
        );
    }
    let fleet = std::fs::read_to_string(layout.fleet_record()).unwrap_or_default();
    let runtime = tokio::runtime::Runtime::new()?;
    let counts = runtime.block_on(async {
        let client = gpu_operator_harness::access::client_for(&layout.kubeconfig()).await?;
        let api: kube::Api<Node> = kube::Api::all(client);
        let selector = format!("{}={}", KWOK_LABEL.0, KWOK_LABEL.1);
        let ready = nodes::count_ready(&api, &selector).await?;
        let total = api
            .list_metadata(&kube::api::ListParams::default().labels(&selector))
            .await?
            .items
            .len();
        anyhow::Ok((ready, total))
    });
    match counts {
        Ok((ready, total)) => println!(
            "  nodes: {total} simulated ({ready} Ready); fleet at start: {}",
            fleet.trim()
        ),
        Err(error) => println!("  nodes: unknown, the API server did not answer: {error:#}"),
    }
    println!("{}", super::env_lines(layout));
    Ok(())
}

/// Resident memory of a process, from /proc.
fn rss(pid: u32) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|kb| kb.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or_else(|| "?".to_owned(), |kb| format!("{} MiB", kb / 1024))
}
