//! `cargo xtask bench`: the operator on simulated fleets of 100, 1,000 and 5,000 nodes, each on a
//! fresh local cluster. Measures time to `ready`, the latency from ClusterPolicy patches to the
//! updated DaemonSet, the operator's writes (from the API server's audit log) during the rollout,
//! the patches and in steady state, and its peak memory and CPU. Prints a table; writes JSON and
//! Markdown to `target/bench/`. `--against PATH` runs every size again, on a fresh cluster, for
//! another operator binary under a user of its own, and prints both side by side.

mod compare;
mod dra;
mod health;
pub(crate) mod patch_parts;
pub(crate) mod patches;
pub(crate) mod policy;
mod pools;
mod proc_stats;
pub(crate) mod report;
pub(crate) mod run;
mod sandbox;
mod upgrade;

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use anyhow::{Context as _, bail};
use clap::Args as ClapArgs;
use gpu_operator_harness::{crd::repo_root, fleet::Fleet};

use crate::{
    cluster::{self, Layout, UpArgs},
    process,
};
use report::{Report, Run};

/// Options of `cargo xtask bench`.
#[derive(ClapArgs, Debug)]
#[allow(
    clippy::struct_excessive_bools,
    reason = "command-line switches, each read by name"
)]
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
    /// Our operator's `--log-level`, such as `info,gpu_operator_core=debug` to see each
    /// reconcile's phases in its log beside the report.
    #[arg(long, value_name = "FILTER", default_value = "info")]
    pub operator_log_level: String,
    /// Where the report goes (default: `target/bench/`).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// The ClusterPolicy to create, a YAML file (default: `manifests/examples/minimal.yaml`);
    /// both operators of a side by side get it.
    #[arg(long, value_name = "PATH")]
    pub policy: Option<PathBuf>,
    /// A JSON merge patch applied to that policy first, such as
    /// `'{"spec":{"driver":{"enabled":false}}}'`.
    #[arg(long, value_name = "JSON")]
    pub policy_patch: Option<String>,
    /// Another operator binary to run on the same fleets, side by side (an older build of ours,
    /// or NVIDIA's): each size runs again on a fresh cluster.
    #[arg(long, value_name = "PATH")]
    pub against: Option<PathBuf>,
    /// Its arguments, whitespace-separated, with `{kubeconfig}`, `{probe_port}` and
    /// `{metrics_port}` filled in (default: ours, `run --leader-elect …`). It must serve `/readyz`
    /// on the probe port.
    #[arg(long, value_name = "ARGS", allow_hyphen_values = true)]
    #[expect(
        clippy::struct_field_names,
        reason = "named after its flag, --against-args"
    )]
    pub against_args: Option<String>,
    /// Extra environment for it (repeatable); it gets the operand images and
    /// `OPERATOR_NAMESPACE` as ours does.
    #[arg(long = "against-env", value_name = "KEY=VALUE", value_parser = parse_env)]
    pub against_env: Vec<(String, String)>,
    /// CRD manifests (a YAML file or a directory of them) applied before it starts, such as
    /// NVIDIA's `deployments/gpu-operator/crds/`.
    #[arg(long, value_name = "PATH")]
    pub against_crds: Vec<PathBuf>,
    /// No control plane: the operator's caches, trigger filters, node label pass, every operand's
    /// validate + render, the status summaries and the driver upgrade (its node and pod caches,
    /// one pass) fed synthetic nodes and pods in memory; `--nodes` then counts GPU nodes (default
    /// 1,000, 5,000, 20,000 and 50,000).
    #[arg(long)]
    pub synthetic: bool,
    /// After the patch series, a driver upgrade of every GPU node (`maxParallelUpgrades: 0`,
    /// `maxUnavailable: 25%`): its time, writes per node upgraded, memory and CPU.
    #[arg(long)]
    pub upgrade: bool,
    /// After the steady window, every GPU node's health agent reports a healthy node and polls
    /// again (the agent's code on a healthy reading): its writes, and the operator's writes and
    /// memory before and after.
    #[arg(long)]
    pub health: bool,
    /// The drivers in three NVIDIADriver pools (`h100` and `a100` by GPU product, `default` for
    /// the rest) under `driver.useNvidiaDriverCRD: true`; with `--upgrade`, the upgrade bumps the
    /// `a100` pool alone under its own `upgradePolicy`.
    #[arg(long)]
    pub pools: bool,
    /// A third of the GPU nodes labelled for VMs (`nvidia.com/gpu.workload.config`
    /// `vm-passthrough` and `vm-vgpu` in turn) before a ClusterPolicy with sandbox workloads on;
    /// after the steady window, 100 container nodes relabelled `vm-passthrough`: the operator's
    /// writes and the time until the DaemonSets follow.
    #[arg(long)]
    pub sandbox: bool,
    /// A GPUCluster beside the ClusterPolicy, a third of the GPU nodes labelled
    /// `nvidia.com/gpu.resource-api=dra` first: ready once both are and the device plugin and
    /// the DRA kubelet plugin each cover their pool (the bench publishes the ResourceSlices the
    /// kubelet plugin would). With `--synthetic`: every GPU node on the GPUCluster's DRA stack
    /// beside the ClusterPolicy, its ResourceSlice cache (an 8-GPU slice per node) and one DRA
    /// readiness pass added.
    #[arg(long)]
    pub dra: bool,
}

/// The ServiceAccount our operator runs as in the bench.
const OURS: &str = "gpu-operator";
/// The ServiceAccount of the `--against` operator: its own user in the audit log.
const AGAINST: &str = "gpu-operator-against";

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
pub(crate) fn ready_timeout(nodes: u32) -> Duration {
    Duration::from_secs(300 + u64::from(nodes))
}

/// The synthetic bench's default sizes, in GPU nodes.
const SYNTHETIC_SIZES: &str = "1000,5000,20000,50000";

/// Runs the bench (see the module docs).
pub fn run(args: &Args) -> anyhow::Result<()> {
    if args.synthetic {
        return synthetic(args);
    }
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
    let against = match &args.against {
        Some(path) if path.is_file() => Some(path.canonicalize()?),
        Some(path) => bail!("--against {}: no such file", path.display()),
        None => None,
    };
    let policy = policy::load(
        &args
            .policy
            .clone()
            .unwrap_or_else(|| repo_root().join(policy::DEFAULT)),
        args.policy_patch.as_deref(),
    )?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| target_dir().join("bench"));
    std::fs::create_dir_all(&out)?;
    let ours = Column {
        binary: binary.clone(),
        env: args.operator_env.clone(),
        log_level: args.operator_log_level.clone(),
        args: None,
        account: OURS,
        crds: Vec::new(),
        dir: out.clone(),
        revision: revision(),
        upgrade: args.upgrade,
        health: args.health,
        pools: args.pools,
        sandbox: args.sandbox,
        dra: args.dra,
        policy: policy.clone(),
    };
    let mut report = ours.report();
    let mut theirs = against.map(|binary| Column {
        revision: binary_revision(&binary),
        binary,
        env: args.against_env.clone(),
        log_level: "info".to_owned(),
        args: args
            .against_args
            .as_ref()
            .map(|a| a.split_whitespace().map(str::to_owned).collect()),
        account: AGAINST,
        crds: args.against_crds.clone(),
        dir: out.join("against"),
        upgrade: false,
        health: false,
        pools: false,
        sandbox: false,
        dra: false,
        policy,
    });
    let mut their_report = theirs.as_ref().map(Column::report);
    for &nodes in &args.nodes.0 {
        report.runs.push(ours.measure(&layout, nodes, args.steady)?);
        write(&report, &out)?;
        if let (Some(column), Some(their_report)) = (&mut theirs, &mut their_report) {
            eprintln!("==> against {}", column.binary.display());
            their_report
                .runs
                .push(column.measure(&layout, nodes, args.steady)?);
            write(their_report, &column.dir)?;
            let side_by_side = compare::markdown(&report, their_report);
            std::fs::write(out.join("side-by-side.md"), &side_by_side)?;
        }
    }
    println!("\n{}\n", report.table());
    eprintln!("report: {}", out.join("latest.md").display());
    if let Some(their_report) = &their_report {
        println!("{}", compare::markdown(&report, their_report));
        eprintln!("side by side: {}", out.join("side-by-side.md").display());
    }
    let failed = |r: &Report| r.runs.iter().any(|r| r.error.is_some());
    if failed(&report) || their_report.as_ref().is_some_and(failed) {
        bail!(
            "some runs failed; see the errors in {}",
            out.join("latest.md").display()
        );
    }
    Ok(())
}

/// One operator binary to measure, and how.
#[allow(
    clippy::struct_excessive_bools,
    reason = "one switch per optional step, each read by name"
)]
struct Column {
    binary: PathBuf,
    env: Vec<(String, String)>,
    log_level: String,
    args: Option<Vec<String>>,
    account: &'static str,
    crds: Vec<PathBuf>,
    dir: PathBuf,
    revision: String,
    /// Whether runs end with the driver upgrade step.
    upgrade: bool,
    /// Whether runs include the GPU health step.
    health: bool,
    /// Whether the drivers run in NVIDIADriver pools.
    pools: bool,
    /// Whether a third of the GPU nodes are VM nodes (`--sandbox`).
    sandbox: bool,
    /// Whether a GPUCluster serves a third of the GPU nodes (`--dra`).
    dra: bool,
    /// The ClusterPolicy it gets.
    policy: policy::Policy,
}

impl Column {
    fn report(&self) -> Report {
        Report {
            operator: self.binary.display().to_string(),
            operator_env: self.env.iter().map(|(k, v)| format!("{k}={v}")).collect(),
            revision: self.revision.clone(),
            policy: format!(
                "{}{}{}{}",
                self.policy.label,
                if self.pools {
                    " with the drivers in 3 NVIDIADriver pools"
                } else {
                    ""
                },
                if self.sandbox {
                    " with sandbox workloads on a third of the GPU nodes"
                } else {
                    ""
                },
                if self.dra {
                    " with a GPUCluster serving a third of the GPU nodes by DRA"
                } else {
                    ""
                }
            ),
            ..Report::default()
        }
    }

    /// One size on a fresh cluster, stopped again afterwards whatever happened.
    fn measure(&self, layout: &Layout, nodes: u32, steady: u64) -> anyhow::Result<Run> {
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
                std::fs::create_dir_all(&self.dir)?;
                let options = run::Options {
                    binary: self.binary.clone(),
                    steady: Duration::from_secs(steady),
                    ready_timeout: ready_timeout(nodes),
                    dir: self.dir.join(format!("{nodes}-nodes")),
                    env: self.env.clone(),
                    log_level: self.log_level.clone(),
                    args: self.args.clone(),
                    account: self.account.to_owned(),
                    crds: self.crds.clone(),
                    upgrade: self.upgrade,
                    health: self.health,
                    pools: self.pools,
                    sandbox: self.sandbox,
                    dra: self.dra,
                    policy: self.policy.object.clone(),
                };
                let runtime = tokio::runtime::Runtime::new()?;
                runtime.block_on(run::measure(&layout.kubeconfig(), &mut run, &options));
            }
            Err(error) => run.error = Some(format!("cluster up failed: {error:#}")),
        }
        cluster::down(layout)?;
        Ok(run)
    }
}

/// What `binary --version` says, as the revision of a binary we did not build.
fn binary_revision(binary: &Path) -> String {
    process::output(Command::new(binary).arg("--version"))
        .ok()
        .and_then(|s| s.lines().next().map(str::to_owned))
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

/// `--synthetic`: builds and runs the `synthetic_bench` example (release profile), which prints
/// a Markdown table; it goes to the terminal and `target/bench/synthetic.md` (with `--dra`,
/// `synthetic-dra.md`).
fn synthetic(args: &Args) -> anyhow::Result<()> {
    let explicit = std::env::args().any(|a| a == "--nodes" || a.starts_with("--nodes="));
    let sizes = if explicit {
        args.nodes
            .0
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(",")
    } else {
        SYNTHETIC_SIZES.to_owned()
    };
    let dra = if args.dra { " on DRA" } else { "" };
    eprintln!("==> synthetic bench (release build): {sizes} GPU nodes{dra}");
    let mut bench = Command::new(env!("CARGO"));
    bench.args([
        "run",
        "--quiet",
        "--release",
        "--package",
        "gpu-operator",
        "--example",
        "synthetic_bench",
        "--",
        "--nodes",
        &sizes,
    ]);
    if args.dra {
        bench.arg("--dra");
    }
    let table = process::output(&mut bench)?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| target_dir().join("bench"));
    std::fs::create_dir_all(&out)?;
    let report = format!(
        "# gpu-operator synthetic bench\n\nbench tree {}, finished {}\n\n{table}",
        revision(),
        k8s_openapi::jiff::Timestamp::now()
    );
    let file = out.join(if args.dra {
        "synthetic-dra.md"
    } else {
        "synthetic.md"
    });
    std::fs::write(&file, &report)?;
    println!("{table}");
    eprintln!("report: {}", file.display());
    Ok(())
}

pub(crate) fn gpu_nodes(fleet: &Fleet) -> u32 {
    gpu_operator_harness::fleet::Profile::ALL
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

/// The workspace's target directory (`$CARGO_TARGET_DIR` or `target/`).
pub(crate) fn target_dir() -> PathBuf {
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

/// `git describe --always --dirty` of the tree, or `unknown`.
pub(crate) fn revision() -> String {
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
