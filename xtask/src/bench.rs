//! `cargo xtask bench`: the operator on simulated fleets of 100, 1,000 and 5,000 nodes, each on a
//! fresh local cluster. Measures time to `ready`, time from a ClusterPolicy patch to the updated
//! DaemonSet, the operator's writes (from the API server's audit log) during the rollout and in
//! steady state, and its peak memory and CPU. Prints a table; writes JSON and Markdown to
//! `target/bench/`.

mod proc_stats;
mod report;
mod run;

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use anyhow::{Context as _, bail};
use clap::Args as ClapArgs;
use gpu_operator_e2e::{crd::repo_root, fleet::Fleet};

use crate::{
    cluster::{self, Layout, UpArgs},
    process,
};
use report::{Report, Run};

/// Options of `cargo xtask bench`.
#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Fleet sizes to run, comma-separated; each gets its own cluster.
    #[arg(long, value_name = "N,N,…", default_value = "100,1000,5000", value_parser = parse_sizes)]
    pub nodes: Sizes,
    /// Seconds of steady state in which writes are counted.
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    pub steady: u64,
    /// A prebuilt `gpu-operator` binary to measure (default: build the release profile).
    #[arg(long, value_name = "PATH")]
    pub operator: Option<PathBuf>,
    /// Extra environment for the operator, such as `MALLOC_ARENA_MAX=2` (repeatable).
    #[arg(long = "operator-env", value_name = "KEY=VALUE", value_parser = parse_env)]
    pub operator_env: Vec<(String, String)>,
    /// Where the report goes (default: `target/bench/`).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// Fleet sizes, in the order given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sizes(pub Vec<u32>);

fn parse_sizes(text: &str) -> Result<Sizes, String> {
    let sizes = text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| match s.replace('_', "").parse::<u32>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!(
                "`{s}` is not a node count: give positive whole numbers, such as `--nodes 100,1000`"
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    if sizes.is_empty() {
        return Err("no fleet size given: use e.g. `--nodes 100,1000,5000`".to_owned());
    }
    Ok(Sizes(sizes))
}

fn parse_env(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
        _ => Err(format!(
            "`{text}` is not KEY=VALUE, e.g. `MALLOC_ARENA_MAX=2`"
        )),
    }
}

/// How long to wait for `ready` at `nodes`: kwok readies about 45 pods a second on an idle
/// 2-core machine, and every GPU node runs seven or eight operand pods (much slower when loaded).
fn ready_timeout(nodes: u32) -> Duration {
    Duration::from_secs(300 + u64::from(nodes))
}

/// Runs the bench (see the module docs).
pub fn run(args: &Args) -> anyhow::Result<()> {
    let layout = Layout::from_env()?;
    if cluster::is_up(&layout) {
        bail!(
            "a local cluster is already up; the bench starts a fresh one per fleet size: stop it first with `cargo xtask cluster down`"
        );
    }
    let binary = match &args.operator {
        Some(path) if path.is_file() => path.canonicalize()?,
        Some(path) => bail!("--operator {}: no such file", path.display()),
        None => build_release()?,
    };
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| target_dir().join("bench"));
    std::fs::create_dir_all(&out)?;
    let mut report = Report {
        operator: binary.display().to_string(),
        operator_env: args
            .operator_env
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect(),
        revision: revision(),
        ..Report::default()
    };
    for &nodes in &args.nodes.0 {
        eprintln!("==> bench: {nodes} nodes");
        let fleet = Fleet::default().scaled_to(nodes)?;
        let mut run = Run {
            nodes,
            gpu_nodes: gpu_nodes(&fleet),
            ..Run::default()
        };
        let up = UpArgs {
            nodes: Some(i64::from(nodes)),
            ..UpArgs::default()
        };
        match cluster::run(cluster::Action::Up(up)) {
            Ok(()) => {
                let options = run::Options {
                    binary: binary.clone(),
                    steady: Duration::from_secs(args.steady),
                    ready_timeout: ready_timeout(nodes),
                    dir: out.join(format!("{nodes}-nodes")),
                    env: args.operator_env.clone(),
                };
                let runtime = tokio::runtime::Runtime::new()?;
                runtime.block_on(run::measure(&layout.kubeconfig(), &mut run, &options));
            }
            Err(error) => run.error = Some(format!("cluster up failed: {error:#}")),
        }
        cluster::down(&layout)?;
        report.runs.push(run);
        write(&report, &out)?;
    }
    println!("\n{}\n", report.table());
    eprintln!("report: {}", out.join("latest.md").display());
    if report.runs.iter().any(|r| r.error.is_some()) {
        bail!(
            "some runs failed; see the errors in {}",
            out.join("latest.md").display()
        );
    }
    Ok(())
}

fn gpu_nodes(fleet: &Fleet) -> u32 {
    gpu_operator_e2e::fleet::Profile::ALL
        .iter()
        .filter(|p| p.gpu_count() > 0)
        .map(|p| fleet.count(*p))
        .sum()
}

/// Writes the report as `latest.{json,md}` and under a timestamped name.
fn write(report: &Report, out: &Path) -> anyhow::Result<()> {
    let mut report = report.clone();
    let now = k8s_openapi::jiff::Timestamp::now();
    report.finished_at = now.to_string();
    let stamp = now.strftime("%Y%m%dT%H%M%SZ").to_string();
    let json = serde_json::to_string_pretty(&report)?;
    let markdown = report.markdown();
    for name in ["latest", &format!("bench-{stamp}")] {
        std::fs::write(out.join(format!("{name}.json")), &json)?;
        std::fs::write(out.join(format!("{name}.md")), &markdown)?;
    }
    Ok(())
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| repo_root().join("target"), PathBuf::from)
}

fn build_release() -> anyhow::Result<PathBuf> {
    eprintln!("==> building gpu-operator (release profile)");
    process::run(Command::new(env!("CARGO")).args([
        "build",
        "--release",
        "--package",
        "gpu-operator",
        "--bin",
        "gpu-operator",
    ]))?;
    let binary = target_dir().join("release/gpu-operator");
    binary
        .canonicalize()
        .with_context(|| format!("{} was not built", binary.display()))
}

fn revision() -> String {
    process::output(Command::new("git").args(["describe", "--always", "--dirty"]))
        .map_or_else(|_| "unknown".to_owned(), |s| s.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_in_order_and_reject_nonsense() {
        assert_eq!(
            parse_sizes("100, 1_000,5000"),
            Ok(Sizes(vec![100, 1000, 5000]))
        );
        assert!(
            parse_sizes("0")
                .unwrap_err()
                .contains("`0` is not a node count")
        );
        assert!(parse_sizes("ten").is_err());
        assert!(parse_sizes(",").unwrap_err().contains("no fleet size"));
        assert_eq!(parse_env("A=b=c"), Ok(("A".to_owned(), "b=c".to_owned())));
        assert!(parse_env("=x").is_err());
    }

    #[test]
    fn the_ready_timeout_grows_with_the_fleet() {
        assert_eq!(ready_timeout(100), Duration::from_secs(400));
        assert!(ready_timeout(5000) > Duration::from_secs(5000));
    }
}
