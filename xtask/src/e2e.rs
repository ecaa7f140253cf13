//! `cargo xtask e2e`: runs the e2e test crate against the local cluster, starting one if none is up
//! (and stopping it again afterwards).

use std::process::Command;

use clap::Args as ClapArgs;

use crate::{
    cluster::{self, Layout, UpArgs},
    process,
    test_counts::{self, Counts},
};

/// Options of `cargo xtask e2e`.
#[derive(ClapArgs, Debug, Default)]
#[allow(
    clippy::struct_field_names,
    reason = "`test_args` names what they are for"
)]
pub struct Args {
    /// Leave a cluster this command started running afterwards (for debugging).
    #[arg(long)]
    pub keep_cluster: bool,
    /// Start the cluster with a real node (`cluster up --real-node`, as root) and run the
    /// real-node tests too. With a cluster already up, they run when it has a real node.
    #[arg(long)]
    pub real_node: bool,
    /// Extra arguments for the test binaries, e.g. a test name filter.
    #[arg(last = true)]
    pub test_args: Vec<String>,
}

/// Runs the e2e tests (see the module docs) and says how many ran.
pub fn run(args: &Args) -> anyhow::Result<Counts> {
    let layout = Layout::from_env()?;
    cluster::clean_if_stale(&layout)?;
    let started_here = !cluster::is_up(&layout);
    if started_here {
        eprintln!("==> no local cluster is up; starting one for the e2e tests");
        cluster::run(cluster::Action::Up(UpArgs {
            real_node: args.real_node,
            ..UpArgs::default()
        }))?;
    } else {
        eprintln!("==> using the local cluster that is already up");
    }
    let real_node = cluster::real_node::is_configured(&layout);
    if args.real_node && !real_node {
        anyhow::bail!(
            "--real-node: the cluster that is up has no real node; stop it (`cargo xtask cluster down`) and run again"
        );
    }
    let result = run_tests(&layout, &args.test_args, real_node);
    if let Ok(counts) = &result {
        eprintln!("==> e2e tests: {counts}");
    }
    if started_here && !args.keep_cluster {
        eprintln!("==> stopping the cluster the e2e run started");
        cluster::down(&layout)?;
    }
    result
}

fn run_tests(layout: &Layout, test_args: &[String], real_node: bool) -> anyhow::Result<Counts> {
    // The tests run the operator and the validator as host processes.
    process::run(Command::new(env!("CARGO")).args([
        "build",
        "--package",
        "gpu-operator",
        "--package",
        "gpu-operator-validator",
        "--bins",
    ]))?;
    // The Node Health Check test runs the engine; a build that fails here fails that test alone,
    // with the command that builds it.
    if let Err(e) = cluster::ensure_nhc(layout) {
        eprintln!(
            "warning: Node Health Check is not built, so the node_health_check test will fail: {e:#}"
        );
    }
    let mut command = Command::new(env!("CARGO"));
    command
        .args([
            "test",
            "--no-fail-fast",
            "--package",
            "gpu-operator-e2e",
            "--features",
            if real_node { "e2e,real-node" } else { "e2e" },
            "--tests",
            "--",
        ])
        .args(test_args);
    with_cluster_env(&mut command, layout);
    test_counts::run(&mut command)
}

/// Where the e2e tests find Node Health Check's `manager` and CRD (`cargo xtask nhc` builds them).
pub const NHC_DIR_ENV: &str = "GPU_OPERATOR_NHC_DIR";

/// Points a command at the local cluster: `KUBECONFIG`, the harness's kubectl/helm first on `PATH`.
pub fn with_cluster_env(command: &mut Command, layout: &Layout) {
    let mut path: Vec<std::path::PathBuf> = layout.path_dirs().to_vec();
    if let Some(existing) = std::env::var_os("PATH") {
        path.extend(std::env::split_paths(&existing));
    }
    command
        .env("KUBECONFIG", layout.kubeconfig())
        .env(
            gpu_operator_harness::access::BIN_DIR_ENV,
            layout.kubernetes_bin(),
        )
        .env(NHC_DIR_ENV, layout.nhc_bin());
    if let Ok(joined) = std::env::join_paths(path) {
        command.env("PATH", joined);
    }
}
