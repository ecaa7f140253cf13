//! `cargo xtask <task>`: the project's automation, in Rust, so every task works the same on any machine.

mod bench;
mod chaos;
mod chart;
mod ci;
mod cluster;
mod codegen;
mod demo;
mod docs;
mod e2e;
mod image;
#[cfg(test)]
mod monitoring;
mod process;
mod test_counts;
mod tidy;

use clap::{Parser, Subcommand};

/// Project automation for the GPU operator.
#[derive(Parser)]
#[command(name = "cargo xtask", about, disable_version_flag = true)]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Regenerate the CRD YAML and other generated files from the Rust sources.
    Codegen,
    /// Manage the local control plane (etcd, kube-apiserver, controller-manager, scheduler, kwok).
    Cluster {
        #[command(subcommand)]
        action: cluster::Action,
    },
    /// Run the end-to-end tests, starting the local cluster first when none is up.
    E2e(e2e::Args),
    /// What CI runs: fmt check, clippy -D warnings, helm lint, the book, unit tests (helm and
    /// promtool ones included), e2e tests (with the real node: as root), the short chaos profile.
    Ci,
    /// The operator's main job on the local cluster, with simulated GPU nodes.
    Demo(demo::Args),
    /// Check the links of the documentation book in docs/ and build it into target/book (mdbook is
    /// installed into the harness cache the first time).
    Book,
    /// Build promtool (first time only) into the harness cache; the alert-rule tests need it.
    Promtool,
    /// Build medik8s Node Health Check (first time only) into the harness cache; the
    /// `node_health_check` e2e test runs it. Set GPU_OPERATOR_NHC_SOURCE to a checkout of its tag
    /// where the Go module proxy refuses the module.
    Nhc,
    /// Build our container image without Docker (OCI layout and tarball under target/image).
    Image(image::Args),
    /// Measure the operator on simulated fleets (100, 1,000, 5,000 nodes), each on its own cluster.
    Bench(Box<bench::Args>),
    /// Kill the operator at random moments on a fresh cluster and check it recovers (5 kills and a
    /// leader failover; `--full`: 50 kills, 5 failovers, kube-apiserver and etcd restarts); writes
    /// `target/chaos/latest.md`.
    Chaos(chaos::Args),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.task {
        Task::Codegen => codegen::run(),
        Task::Cluster { action } => cluster::run(action),
        Task::E2e(args) => e2e::run(&args).map(|_| ()),
        Task::Ci => ci::run(),
        Task::Demo(args) => demo::run(&args),
        Task::Bench(args) => bench::run(&args),
        Task::Image(args) => image::run(&args),
        Task::Chaos(args) => chaos::run(&args),
        Task::Book => cluster::Layout::from_env().and_then(|layout| {
            let mdbook = docs::ensure_mdbook(&layout)?;
            docs::build(&codegen::workspace_root(), &mdbook)
        }),
        Task::Promtool => cluster::Layout::from_env()
            .and_then(|layout| cluster::ensure_promtool(&layout))
            .map(|path| println!("{}", path.display())),
        Task::Nhc => cluster::Layout::from_env()
            .and_then(|layout| cluster::ensure_nhc(&layout))
            .map(|path| println!("{}", path.display())),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
