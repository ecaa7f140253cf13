//! `gpu-operator`: the operator binary. Wiring only; the work lives in the library crates.

mod run;

use std::io::Write as _;

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
    /// Print the CustomResourceDefinitions this operator serves (ClusterPolicy, nvidia.com/v1).
    Crds,
}

fn main() -> std::process::ExitCode {
    let result = match Cli::parse().command {
        Command::Run(args) => run::main(&args),
        Command::Crds => print_crds(),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn print_crds() -> anyhow::Result<()> {
    let yaml = gpu_operator_api::crd_yaml()?;
    std::io::stdout().lock().write_all(yaml.as_bytes())?;
    Ok(())
}
