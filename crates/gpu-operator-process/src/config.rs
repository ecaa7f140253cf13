//! The command line and environment of `gpu-operator run`, with NVIDIA's flag names and defaults
//! (`--metrics-bind-address :8080`, `--health-probe-bind-address :8081`, `--leader-elect`,
//! `OPERATOR_NAMESPACE`), and the API client they describe.

use std::{path::PathBuf, time::Duration};

use clap::{ArgAction, Args};
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::{
    admin::BindAddress,
    leader::{self, Fence, LeaseParams},
    telemetry::{self, LogFormat},
};

/// Errors of the configuration.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `OPERATOR_NAMESPACE` is missing.
    #[error(
        "OPERATOR_NAMESPACE is not set: set it to the namespace the operator runs in (the chart sets it from the pod's namespace)"
    )]
    NoNamespace,
    /// The kubeconfig named by `--kubeconfig` cannot be read.
    #[error("cannot read the kubeconfig {path}: {source}")]
    Kubeconfig {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// No client configuration could be built.
    #[error(
        "cannot configure the Kubernetes client (pass --kubeconfig, set KUBECONFIG, or run in a pod): {0}"
    )]
    ClientConfig(String),
    /// The client could not be built from the configuration.
    #[error("cannot build the Kubernetes client: {0}")]
    Client(#[source] kube::Error),
}

/// Flags and environment of `gpu-operator run`.
#[derive(Args, Clone, Debug, PartialEq, Eq)]
pub struct RunArgs {
    /// Namespace of the operator and its operands.
    #[arg(long, env = "OPERATOR_NAMESPACE", hide_env_values = true)]
    pub operator_namespace: Option<String>,

    /// Run only while holding the leader-election Lease (`--leader-elect` or `--leader-elect=true`).
    #[arg(long, action = ArgAction::Set, default_value_t = false, num_args = 0..=1,
          require_equals = true, default_missing_value = "true")]
    pub leader_elect: bool,

    /// Name of the leader-election Lease (NVIDIA's id, so the two operators exclude each other).
    #[arg(long, default_value = leader::DEFAULT_LEASE_NAME)]
    pub leader_elect_lease_name: String,

    /// Namespace of the leader-election Lease; defaults to OPERATOR_NAMESPACE.
    #[arg(long)]
    pub leader_elect_namespace: Option<String>,

    /// How long the leader keeps retrying to renew before it gives up (e.g. `10s`); the lease
    /// duration becomes this + 5 s, as in NVIDIA's operator. Default: 15 s lease, 10 s deadline.
    #[arg(long, value_parser = parse_duration)]
    pub leader_lease_renew_deadline: Option<Duration>,

    /// Where to serve /metrics (`:8080`, `IP:PORT`, or `0` to disable).
    #[arg(long, default_value = ":8080")]
    pub metrics_bind_address: BindAddress,

    /// Where to serve /healthz and /readyz.
    #[arg(long, default_value = ":8081")]
    pub health_probe_bind_address: BindAddress,

    /// Log filter: a level (`info`, `debug`) or RUST_LOG syntax (`info,kube=debug`).
    #[arg(long, env = "RUST_LOG", default_value = "info", value_parser = parse_log_filter)]
    pub log_level: String,

    /// Log line format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// Kubeconfig file; else KUBECONFIG, else the in-cluster ServiceAccount.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,

    /// This process's name in the Lease and in Events; defaults to the hostname.
    #[arg(long, env = "POD_NAME")]
    pub pod_name: Option<String>,
}

fn parse_log_filter(value: &str) -> Result<String, telemetry::Error> {
    telemetry::parse_filter(value).map(|_| value.to_owned())
}

/// Parses Go-style durations with one unit (`500ms`, `10s`, `2m`) or plain seconds (`10`).
fn parse_duration(value: &str) -> Result<Duration, String> {
    let invalid = || format!("invalid duration `{value}`: use e.g. `10s`, `500ms` or `1m`");
    let value = value.trim();
    let split = value
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(value.len());
    let (number, unit) = value.split_at(split);
    let number: u64 = number.parse().map_err(|_| invalid())?;
    match unit {
        "" | "s" => Ok(Duration::from_secs(number)),
        "ms" => Ok(Duration::from_millis(number)),
        "m" => Ok(Duration::from_secs(number.saturating_mul(60))),
        _ => Err(invalid()),
    }
}

impl RunArgs {
    /// The operator namespace; fails with what to do when `OPERATOR_NAMESPACE` is unset or empty.
    pub fn namespace(&self) -> Result<&str, Error> {
        self.operator_namespace
            .as_deref()
            .filter(|namespace| !namespace.trim().is_empty())
            .ok_or(Error::NoNamespace)
    }

    /// The namespace of the Lease: `--leader-elect-namespace`, else the operator namespace.
    pub fn lease_namespace(&self) -> Result<&str, Error> {
        match self.leader_elect_namespace.as_deref() {
            Some(namespace) if !namespace.is_empty() => Ok(namespace),
            _ => self.namespace(),
        }
    }

    /// This process's name: `POD_NAME`, else the hostname (the pod name inside Kubernetes). For
    /// Events' `reportingInstance`.
    pub fn identity(&self) -> String {
        self.pod_name
            .clone()
            .filter(|name| !name.is_empty())
            .unwrap_or_else(hostname)
    }

    /// The Lease holder identity: [`Self::identity`] plus a per-process suffix, as
    /// controller-runtime does (`<hostname>_<uuid>`), so two processes on one host never both
    /// believe they hold the Lease.
    pub fn lease_identity(&self) -> String {
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_micros());
        format!("{}_{:x}{:x}", self.identity(), std::process::id(), started)
    }

    /// The leader-election timings the flags ask for.
    pub fn lease_params(&self) -> LeaseParams {
        self.leader_lease_renew_deadline
            .map_or_else(LeaseParams::default, LeaseParams::with_renew_deadline)
    }

    /// A client from `--kubeconfig`, else `KUBECONFIG`/`~/.kube/config`, else in-cluster.
    pub async fn client(&self) -> Result<kube::Client, Error> {
        client(self.kubeconfig.as_deref()).await
    }

    /// The reconcilers' client: as [`Self::client`], but its writes pass only while `fence` is
    /// open (while this process leads).
    pub async fn fenced_client(&self, fence: &Fence) -> Result<kube::Client, Error> {
        let config = client_config(self.kubeconfig.as_deref()).await?;
        Ok(kube::client::ClientBuilder::try_from(config)
            .map_err(Error::Client)?
            .with_layer(&fence.layer())
            .build())
    }
}

/// A client from the kubeconfig at `path`, else `KUBECONFIG`/`~/.kube/config`, else in-cluster.
pub async fn client(path: Option<&std::path::Path>) -> Result<kube::Client, Error> {
    kube::Client::try_from(client_config(path).await?).map_err(Error::Client)
}

async fn client_config(path: Option<&std::path::Path>) -> Result<kube::Config, Error> {
    let config = match path {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path).map_err(|source| Error::Kubeconfig {
                path: path.to_owned(),
                source,
            })?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .map_err(|error| Error::ClientConfig(error.to_string()))?
        }
        None => kube::Config::infer()
            .await
            .map_err(|error| Error::ClientConfig(error.to_string()))?,
    };
    Ok(config)
}

/// The kernel's hostname (a pod's is its name), else `HOSTNAME`, else a fixed fallback.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .or_else(|| {
            std::env::var("HOSTNAME")
                .ok()
                .filter(|name| !name.is_empty())
        })
        .unwrap_or_else(|| "gpu-operator".to_owned())
}

#[cfg(test)]
mod tests;
