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
pub struct Args {
    /// Leave a cluster this command started running afterwards (for debugging).
    #[arg(long)]
    pub keep_cluster: bool,
    /// Extra arguments for the test binaries, e.g. a test name filter.
    #[arg(last = true)]
    pub test_args: Vec<String>,
}

/// Runs the e2e tests (see the module docs) and says how many ran.
pub fn run(args: &Args) -> anyhow::Result<Counts> {
    let layout = Layout::from_env()?;
    let started_here = !cluster::is_up(&layout);
    if started_here {
        eprintln!("==> no local cluster is up; starting one for the e2e tests");
        cluster::run(cluster::Action::Up(UpArgs::default()))?;
    } else {
        eprintln!("==> using the local cluster that is already up");
    }
    let result = run_tests(&layout, &args.test_args);
    if let Ok(counts) = &result {
        eprintln!("==> e2e tests: {counts}");
    }
    if started_here && !args.keep_cluster {
        eprintln!("==> stopping the cluster the e2e run started");
        cluster::down(&layout)?;
    }
    result
}

fn run_tests(layout: &Layout, test_args: &[String]) -> anyhow::Result<Counts> {
    // The tests run the operator and the validator as host processes.
    process::run(Command::new(env!("CARGO")).args([
        "build",
        "--package",
        "gpu-operator",
        "--package",
        "gpu-operator-validator",
        "--bins",
    ]))?;
    let mut command = Command::new(env!("CARGO"));
    command
        .args([
            "test",
            "--no-fail-fast",
            "--package",
            "gpu-operator-e2e",
            "--features",
            "e2e",
            "--tests",
            "--",
        ])
        .args(test_args);
    with_cluster_env(&mut command, layout);
    test_counts::run(&mut command)
}

/// Points a command at the local cluster: `KUBECONFIG`, the harness's kubectl/helm first on `PATH`.
pub fn with_cluster_env(command: &mut Command, layout: &Layout) {
    let mut path: Vec<std::path::PathBuf> = layout.path_dirs().to_vec();
    if let Some(existing) = std::env::var_os("PATH") {
        path.extend(std::env::split_paths(&existing));
    }
    command.env("KUBECONFIG", layout.kubeconfig()).env(
        gpu_operator_e2e::harness::BIN_DIR_ENV,
        layout.kubernetes_bin(),
    );
    if let Ok(joined) = std::env::join_paths(path) {
        command.env("PATH", joined);
    }
}
