//! `gpu-operator`: the operator binary. Wiring only; the work lives in the library crates.

mod cleanup;
mod crds;
mod run;
mod server_facts;
mod upgrade_status;

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
    Run(Box<gpu_operator_process::config::RunArgs>),
    /// The CustomResourceDefinitions this operator serves (ClusterPolicy, nvidia.com/v1, and
    /// NVIDIADriver, nvidia.com/v1alpha1): print (the default), apply or delete them.
    Crds {
        #[command(subcommand)]
        action: Option<crds::Action>,
        /// Kubeconfig file; else KUBECONFIG, else the in-cluster ServiceAccount.
        #[arg(long, global = true)]
        kubeconfig: Option<PathBuf>,
    },
    /// Remove what the operator and its agents wrote on nodes: labels, annotations, the driver
    /// upgrade's cordon, the validator's conditions (the chart's uninstall hook).
    CleanupNodeLabels {
        /// Kubeconfig file; else KUBECONFIG, else the in-cluster ServiceAccount.
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
    },
    /// Driver upgrades: `upgrade status` prints the GPU nodes by upgrade state, with reasons.
    Upgrade {
        #[command(subcommand)]
        action: UpgradeAction,
    },
}

#[derive(Subcommand)]
enum UpgradeAction {
    /// The GPU nodes by driver upgrade state (cordon, time in state, failure reason) and the
    /// ClusterPolicy's DriverUpgrade condition.
    Status {
        /// Kubeconfig file; else KUBECONFIG, else the in-cluster ServiceAccount.
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
        /// The operator's namespace, where the driver pods run.
        #[arg(
            long,
            short = 'n',
            env = "OPERATOR_NAMESPACE",
            default_value = "gpu-operator"
        )]
        namespace: String,
    },
}

fn main() -> std::process::ExitCode {
    let result = match Cli::parse().command {
        Command::Run(args) => run::main(&args),
        Command::Crds { action, kubeconfig } => crds::main(action, kubeconfig.as_deref()),
        Command::CleanupNodeLabels { kubeconfig } => cleanup::main(kubeconfig.as_deref()),
        Command::Upgrade {
            action:
                UpgradeAction::Status {
                    kubeconfig,
                    namespace,
                },
        } => upgrade_status::main(kubeconfig.as_deref(), &namespace),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
