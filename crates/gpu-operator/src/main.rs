//! `gpu-operator`: the operator binary. Wiring only; the work lives in the library crates.

mod cleanup;
mod crds;
mod run;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// A Rust, drop-in replacement for NVIDIA's GPU Operator.
#[derive(Parser)]
#[command(name = "gpu-operator", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the operator: reconcile the ClusterPolicy into the GPU software stack.
    Run(Box<gpu_operator_runtime::config::RunArgs>),
    /// The CustomResourceDefinitions this operator serves (ClusterPolicy, nvidia.com/v1): print
    /// (the default), apply or delete them.
    Crds {
        #[command(subcommand)]
        action: Option<crds::Action>,
        /// Kubeconfig file; else KUBECONFIG, else the in-cluster ServiceAccount.
        #[arg(long, global = true)]
        kubeconfig: Option<PathBuf>,
    },
    /// Remove the node labels the operator wrote (the chart's uninstall hook).
    CleanupNodeLabels {
        /// Kubeconfig file; else KUBECONFIG, else the in-cluster ServiceAccount.
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
    },
}

fn main() -> std::process::ExitCode {
    let result = match Cli::parse().command {
        Command::Run(args) => run::main(&args),
        Command::Crds { action, kubeconfig } => crds::main(action, kubeconfig.as_deref()),
        Command::CleanupNodeLabels { kubeconfig } => cleanup::main(kubeconfig.as_deref()),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
