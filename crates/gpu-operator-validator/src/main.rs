//! `gpu-operator-validator`: parses the environment and arguments, runs the component's check and
//! exits with its code (0 validated, 1 failed, 2 bad configuration, 3 not reported).

use std::{process::ExitCode, sync::Arc};

use anyhow::Context as _;
use gpu_operator_health::source::NvmlSource;
use gpu_operator_validator::{
    EXIT_FAILED, EXIT_USAGE,
    config::{self, Invocation, MetricsConfig, USAGE},
    discovery, health, lifecycle, metrics,
    nvml::NvmlLibrary,
};
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    // The discovery agent is deployed by the chart with our image only (no operand renders it).
    if args.first().map(String::as_str) == Some("discover") {
        return discover(&args[1..]);
    }
    // So is the GPU health agent (ours, not NVIDIA's).
    if args.first().map(String::as_str) == Some("health") {
        return health(&args[1..]);
    }
    let config = match config::parse(&args, |name| std::env::var_os(name)) {
        Ok(Invocation::Help) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Ok(Invocation::Run(config)) => config,
        Ok(Invocation::Metrics(config)) => return metrics(*config),
        Ok(Invocation::Idle) => return idle(),
        Ok(Invocation::Cleanup(dir)) => return cleanup(&dir),
        Ok(Invocation::Wait { component, dir }) => return wait(&component, &dir),
        Err(e) => {
            eprintln!("error: {e}\n\n{USAGE}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        component = %config.component,
        node = config.node_name.as_deref().unwrap_or(""),
        "gpu-operator-validator starting"
    );
    match run(&config) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(EXIT_FAILED)
        }
    }
}

fn run(config: &config::Config) -> anyhow::Result<u8> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    Ok(runtime.block_on(gpu_operator_validator::run(config, Arc::new(NvmlLibrary))))
}

/// The node status exporter: serve the gauges until SIGTERM. Without a Kubernetes client it
/// still serves, with the device count at -1.
fn metrics(config: MetricsConfig) -> ExitCode {
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        node = config.checks.node_name.as_deref().unwrap_or(""),
        port = config.port,
        "gpu-operator-validator metrics starting"
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build();
    let served = runtime.map_err(anyhow::Error::from).and_then(|rt| {
        rt.block_on(async {
            let client = match kube::Client::try_default().await {
                Ok(client) => Some(client),
                Err(e) => {
                    tracing::warn!(
                        "no Kubernetes client (in-cluster config or KUBECONFIG): {e}; the device count is -1"
                    );
                    None
                }
            };
            metrics::serve(config, Arc::new(NvmlLibrary), client)
                .await
                .map_err(anyhow::Error::from)
        })
    });
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(EXIT_FAILED)
        }
    }
}

/// GPU node discovery without NFD: label this node from the host's facts (see
/// [`gpu_operator_validator::discovery`]).
fn discover(args: &[String]) -> ExitCode {
    let config = match discovery::parse(args, |name| std::env::var_os(name)) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        node = %config.node_name,
        root = %config.host_root.display(),
        "gpu-operator-validator discover starting"
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    let result = runtime.map_err(anyhow::Error::from).and_then(|rt| {
        rt.block_on(async {
            let client = kube::Client::try_default()
                .await
                .context("no Kubernetes client (in-cluster config or KUBECONFIG)")?;
            discovery::run(client, config)
                .await
                .map_err(anyhow::Error::from)
        })
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(EXIT_FAILED)
        }
    }
}

/// The GPU health agent (see [`gpu_operator_validator::health`]).
fn health(args: &[String]) -> ExitCode {
    let config = match health::config::parse(args, |name| std::env::var_os(name)) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let library = config.library();
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        node = config.node_name.as_deref().unwrap_or(""),
        library = %library.display(),
        "gpu-operator-validator health starting"
    );
    let source = Box::new(NvmlSource::new(library));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    let result = runtime.map_err(anyhow::Error::from).and_then(|rt| {
        rt.block_on(async {
            let client = kube::Client::try_default().await;
            if config.once {
                let client = client.ok().filter(|_| config.node_name.is_some());
                return health::agent::once(&config, source, client)
                    .await
                    .map_err(anyhow::Error::from);
            }
            let client =
                client.context("no Kubernetes client (in-cluster config or KUBECONFIG)")?;
            let name = config
                .node_name
                .clone()
                .context("NODE_NAME must be set (the downward API's spec.nodeName)")?;
            health::agent::run(&config, source, client, &name)
                .await
                .map_err(anyhow::Error::from)
        })
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(EXIT_FAILED)
        }
    }
}

/// The main container: report success and wait for SIGTERM.
fn idle() -> ExitCode {
    println!("all validations are successful");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    match runtime.map(|rt| rt.block_on(lifecycle::idle())) {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) | Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(EXIT_FAILED)
        }
    }
}

/// `wait <component>`: return once `<component>-ready` exists in `dir`.
fn wait(component: &str, dir: &std::path::Path) -> ExitCode {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    match runtime {
        Ok(rt) => {
            rt.block_on(lifecycle::wait_for(
                dir,
                component,
                std::time::Duration::from_secs(5),
            ));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(EXIT_FAILED)
        }
    }
}

/// `cleanup`: remove the status files so a restarted validator gates the operands again.
fn cleanup(dir: &std::path::Path) -> ExitCode {
    match lifecycle::cleanup(dir) {
        Ok(removed) => {
            println!("removed {removed} status file(s) from {}", dir.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: cleaning {}: {e}", dir.display());
            ExitCode::from(EXIT_FAILED)
        }
    }
}
