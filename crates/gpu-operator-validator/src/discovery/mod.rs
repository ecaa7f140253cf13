//! GPU node discovery without node-feature-discovery (NFD): the `discover` subcommand, run by the
//! chart's `gpu-node-discovery` DaemonSet on every Linux node when `nfd.enabled` is true.
//!
//! It reads the host (read-only mounts under `HOST_ROOT_CTR_PATH`, default `/host`) and writes on
//! its own Node exactly the NFD labels this operator consumes, nothing else:
//!
//! | label | from |
//! |---|---|
//! | `feature.node.kubernetes.io/pci-10de.present=true` | some PCI device with vendor `0x10de` (`sys/bus/pci/devices/*/vendor`) |
//! | `feature.node.kubernetes.io/pci-0300_10de.present=true` | an NVIDIA device of class `0x0300xx` (VGA controller) |
//! | `feature.node.kubernetes.io/pci-0302_10de.present=true` | an NVIDIA device of class `0x0302xx` (3D controller) |
//! | `feature.node.kubernetes.io/kernel-version.full` | `proc/sys/kernel/osrelease` (else this container's: the kernel is the host's) |
//! | `feature.node.kubernetes.io/system-os_release.ID`, `.VERSION_ID` | `etc/os-release`, else `usr/lib/os-release` |
//!
//! # Rules
//! - **Only its own node** (`NODE_NAME`), and **only when a value changed**: each pass reads the
//!   node's metadata and writes nothing when every label already has its value. A converged node
//!   costs one read per `DISCOVERY_INTERVAL_SECONDS` (default 600) and no write.
//! - **Never removes another writer's labels**: it writes with server-side apply under the field
//!   manager [`plan::FIELD_MANAGER`]. When a fact goes away (a GPU removed), the next apply leaves
//!   that label out, and the API server deletes it only if no other manager also set it.
//! - **Stays out of NFD's way**: when NFD is installed it writes nothing at all. NFD counts as
//!   installed when the API server serves `nfd.k8s-sigs.io` (NFD's CRDs), when the node carries an
//!   `nfd.node.kubernetes.io/` annotation (NFD master's), or when the node carries a
//!   `feature.node.kubernetes.io/` label outside the table above (NFD writes many: CPU, memory,
//!   kernel config). Checked on every pass, so installing NFD later takes over.
//!
//! # RBAC
//! `get` and `patch` on `nodes` (cluster-scoped), nothing else: `get` reads its node's labels and
//! managed fields; `patch` applies the labels. Kubernetes RBAC cannot narrow a patch to labels or
//! to one node, so the agent itself sends only `metadata.labels` of `NODE_NAME`. The API group
//! check uses discovery, which every authenticated client may read.
//!
//! # Usage
//! `gpu-operator-validator discover [--once]`: `--once` makes one pass and exits (0 done or
//! nothing to do, 1 an API error, 2 bad configuration); without it the agent repeats every
//! `DISCOVERY_INTERVAL_SECONDS` until SIGTERM.

pub mod facts;
pub mod plan;

use std::{collections::BTreeMap, ffi::OsString, path::PathBuf, time::Duration};

use gpu_operator_api::validator::env;
use k8s_openapi::api::core::v1::Node;
use kube::{
    Api, Client, ResourceExt as _,
    api::{Patch, PatchParams},
};
use serde_json::json;

pub use plan::Plan;

/// `DISCOVERY_INTERVAL_SECONDS`: seconds between passes.
pub const INTERVAL_ENV: &str = "DISCOVERY_INTERVAL_SECONDS";
/// The default pass interval.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(600);

/// The agent's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveryConfig {
    /// `NODE_NAME`: the node to label, this pod's.
    pub node_name: String,
    /// `HOST_ROOT_CTR_PATH`: where the host's `/` is mounted (read-only).
    pub host_root: PathBuf,
    /// `DISCOVERY_INTERVAL_SECONDS`.
    pub interval: Duration,
    /// `--once`: one pass, then exit.
    pub once: bool,
}

/// Why the agent could not run or finish a pass.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    /// Bad arguments or environment (exit 2).
    #[error("{0}")]
    Config(String),
    /// An API request failed (exit 1; the loop retries on the next pass).
    #[error("{action} node {node}: {source}")]
    Api {
        /// What was being done.
        action: &'static str,
        /// The node.
        node: String,
        /// The client's error.
        source: kube::Error,
    },
}

/// Parses `discover`'s arguments (after the subcommand) and environment.
pub fn parse(
    args: &[String],
    var: impl Fn(&str) -> Option<OsString>,
) -> Result<DiscoveryConfig, DiscoveryError> {
    let text = |name: &str| {
        var(name)
            .map(|v| v.to_string_lossy().trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    let mut once = false;
    for arg in args {
        match arg.as_str() {
            "--once" => once = true,
            other => {
                return Err(DiscoveryError::Config(format!(
                    "unexpected argument `{other}`; usage: gpu-operator-validator discover [--once]"
                )));
            }
        }
    }
    let node_name = text(env::NODE_NAME).ok_or_else(|| {
        DiscoveryError::Config(
            "NODE_NAME must be set for discover (the downward API's spec.nodeName)".into(),
        )
    })?;
    let interval = match text(INTERVAL_ENV) {
        None => DEFAULT_INTERVAL,
        Some(v) => match v.parse::<u64>() {
            Ok(secs) if secs > 0 => Duration::from_secs(secs),
            _ => {
                return Err(DiscoveryError::Config(format!(
                    "{INTERVAL_ENV}={v:?} is not a positive whole number of seconds (default 600)"
                )));
            }
        },
    };
    Ok(DiscoveryConfig {
        node_name,
        host_root: text(env::HOST_ROOT_CTR_PATH).map_or_else(|| "/host".into(), PathBuf::from),
        interval,
        once,
    })
}

/// One pass: read the host and the node, and apply the labels if something changed.
pub async fn pass(client: &Client, config: &DiscoveryConfig) -> Result<Plan, DiscoveryError> {
    let node = &config.node_name;
    let api_error = |action| {
        move |source| DiscoveryError::Api {
            action,
            node: node.clone(),
            source,
        }
    };
    let groups = client
        .list_api_groups()
        .await
        .map_err(api_error("listing API groups for"))?;
    let nfd_api = groups.groups.iter().any(|g| g.name == plan::NFD_API_GROUP);
    let nodes: Api<Node> = Api::all(client.clone());
    let meta = nodes
        .get_metadata(node)
        .await
        .map_err(api_error("reading"))?;
    let desired = facts::labels(&facts::read(&config.host_root, true));
    let labels: BTreeMap<String, String> = meta.labels().clone();
    let owned = plan::owned_labels(meta.managed_fields(), plan::FIELD_MANAGER);
    let decision = plan::plan(
        plan::nfd_sign(nfd_api, &labels, meta.annotations()),
        &labels,
        &owned,
        desired,
    );
    if let Plan::Apply(desired) = &decision {
        let body = json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": node, "labels": desired},
        });
        nodes
            .patch_metadata(
                node,
                &PatchParams::apply(plan::FIELD_MANAGER).force(),
                &Patch::Apply(body),
            )
            .await
            .map_err(api_error("labelling"))?;
    }
    Ok(decision)
}

/// Logs what a pass did; NFD's presence is said once per change of reason.
fn report(node: &str, decision: &Plan, last: &mut Option<Plan>) {
    if last.as_ref() == Some(decision) {
        return;
    }
    match decision {
        Plan::NfdPresent(reason) => {
            tracing::info!(node, "NFD is installed ({reason}): writing no labels");
        }
        Plan::UpToDate => tracing::info!(node, "labels up to date"),
        Plan::Apply(labels) => tracing::info!(node, ?labels, "labels applied"),
    }
    *last = Some(decision.clone());
}

/// Runs the agent: one pass with `once`, else a pass every interval until SIGTERM or Ctrl-C.
pub async fn run(client: Client, config: DiscoveryConfig) -> Result<(), DiscoveryError> {
    let mut last = None;
    if config.once {
        let decision = pass(&client, &config).await?;
        report(&config.node_name, &decision, &mut last);
        return Ok(());
    }
    let mut shutdown = std::pin::pin!(crate::lifecycle::idle());
    loop {
        match pass(&client, &config).await {
            Ok(decision) => report(&config.node_name, &decision, &mut last),
            Err(e) => {
                tracing::warn!("{e}; retrying in {}s", config.interval.as_secs());
                last = None;
            }
        }
        tokio::select! {
            _ = &mut shutdown => return Ok(()),
            () = tokio::time::sleep(config.interval) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<OsString> {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| OsString::from(v))
        }
    }

    #[test]
    fn parses_node_root_interval_and_once() {
        let config = parse(
            &["--once".into()],
            vars(&[
                ("NODE_NAME", "gpu-1"),
                ("HOST_ROOT_CTR_PATH", "/tmp/root"),
                ("DISCOVERY_INTERVAL_SECONDS", "30"),
            ]),
        )
        .unwrap();
        assert_eq!(
            config,
            DiscoveryConfig {
                node_name: "gpu-1".into(),
                host_root: "/tmp/root".into(),
                interval: Duration::from_secs(30),
                once: true,
            }
        );
        let defaults = parse(&[], vars(&[("NODE_NAME", "gpu-1")])).unwrap();
        assert_eq!(defaults.host_root, PathBuf::from("/host"));
        assert_eq!(defaults.interval, DEFAULT_INTERVAL);
        assert!(!defaults.once);
    }

    #[test]
    fn bad_configuration_names_the_variable_or_argument() {
        let error = |args: &[String], pairs| parse(args, vars(pairs)).unwrap_err().to_string();
        assert!(error(&[], &[]).contains("NODE_NAME"));
        assert!(
            error(
                &[],
                &[("NODE_NAME", "n"), ("DISCOVERY_INTERVAL_SECONDS", "0")]
            )
            .contains("DISCOVERY_INTERVAL_SECONDS=\"0\"")
        );
        assert!(error(&["--twice".into()], &[("NODE_NAME", "n")]).contains("--twice"));
    }
}
