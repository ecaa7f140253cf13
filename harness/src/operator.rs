//! Running the operator binary as a host process against the test cluster, under a ServiceAccount
//! token (the chart's: see [`crate::chart::operator_kubeconfig`]), so its requests are its own in
//! the API server's audit log and RBAC applies to them; and reading that log.

use std::{
    fs,
    io::BufRead as _,
    net::TcpListener,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use anyhow::{Context as _, bail};
use k8s_openapi::{api::core::v1::ServiceAccount, jiff::Timestamp};
use kube::{Api, api::PostParams};
use serde_json::json;

use crate::access::kubeconfig_path;

/// The chart's malloc tuning (large blocks mapped apart, unmapped when freed), so a host-process
/// run has a pod's memory; the chart's tests check that the two agree.
pub const MALLOC_ENV: [(&str, &str); 1] = [("MALLOC_MMAP_THRESHOLD_", "131072")];

/// The operator's image environment, one image per operand, so a default ClusterPolicy can get
/// ready; the device plugin's comes first (an e2e step drops it).
pub const IMAGES: [(&str, &str); 9] = [
    (
        "DEVICE_PLUGIN_IMAGE",
        "nvcr.io/nvidia/k8s-device-plugin:v0.17.0",
    ),
    ("VALIDATOR_IMAGE", "ghcr.io/example/gpu-operator:e2e"),
    (
        "DCGM_IMAGE",
        "nvcr.io/nvidia/cloud-native/dcgm:4.6.0-1-ubuntu24.04",
    ),
    (
        "DCGM_EXPORTER_IMAGE",
        "nvcr.io/nvidia/k8s/dcgm-exporter:4.6.0-4.8.3-distroless",
    ),
    (
        "MIG_MANAGER_IMAGE",
        "nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.15.0",
    ),
    ("GFD_IMAGE", "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"),
    ("DRIVER_IMAGE", "nvcr.io/nvidia/driver:595.91.07"),
    (
        "DRIVER_MANAGER_IMAGE",
        "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.12.0",
    ),
    (
        "CONTAINER_TOOLKIT_IMAGE",
        "nvcr.io/nvidia/k8s/container-toolkit:v1.20.0",
    ),
];

/// Path of a binary of this workspace built by `cargo build` (the `cargo xtask e2e` task builds
/// them first): `$CARGO_TARGET_DIR` or the workspace's `target/`, debug profile.
pub fn workspace_binary(name: &str) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"),
        PathBuf::from,
    );
    target.join("debug").join(name)
}

/// `N` distinct free ports on 127.0.0.1: all bound at once, then released (good enough for a
/// test). Binding one at a time may hand out the same port twice, as it did to the operator's
/// probe and metrics servers.
pub fn free_ports<const N: usize>() -> anyhow::Result<[u16; N]> {
    let listeners = (0..N)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<Vec<_>, _>>()?;
    let mut ports = [0; N];
    for (port, listener) in ports.iter_mut().zip(&listeners) {
        *port = listener.local_addr()?.port();
    }
    Ok(ports)
}

/// Creates ServiceAccount `name` in `namespace`, binds it to `cluster_role` and returns a
/// kubeconfig (for the cluster of the admin kubeconfig `admin`) that authenticates with a fresh
/// token of it, with the user name the audit log shows. For the benchmark, which measures the
/// operator rather than its RBAC.
pub async fn service_account_kubeconfig_from(
    admin: &Path,
    client: &kube::Client,
    namespace: &str,
    name: &str,
    cluster_role: &str,
    dir: &Path,
) -> anyhow::Result<(PathBuf, String)> {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let account: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": name}}))?;
    accounts
        .create(&PostParams::default(), &account)
        .await
        .context("creating the operator's ServiceAccount")?;
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": format!("{namespace}-{name}")},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_role},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
    });
    let bindings: Api<k8s_openapi::api::rbac::v1::ClusterRoleBinding> = Api::all(client.clone());
    bindings
        .create(&PostParams::default(), &serde_json::from_value(binding)?)
        .await
        .context("binding the operator's ServiceAccount")?;
    crate::chart::token_kubeconfig_from(admin, client, namespace, name, dir).await
}

/// A running `gpu-operator run` process; stopped (SIGTERM, then kill) when dropped.
pub struct Operator {
    child: Child,
    /// Where its stdout and stderr go.
    pub log: PathBuf,
    /// Its health-probe port (`/healthz`, `/readyz`).
    pub probe_port: u16,
    /// Its metrics port (`/metrics`).
    pub metrics_port: u16,
}

impl Operator {
    /// Starts the debug build with `kubeconfig`, in `namespace`, with extra environment `env`.
    pub fn start(
        kubeconfig: &Path,
        namespace: &str,
        env: &[(&str, &str)],
        log: &Path,
    ) -> anyhow::Result<Self> {
        let binary = workspace_binary("gpu-operator");
        if !binary.is_file() {
            bail!(
                "{} is not built: run the e2e tests with `cargo xtask e2e`, which builds it",
                binary.display()
            );
        }
        Self::spawn(
            &binary,
            "info,gpu_operator=debug",
            kubeconfig,
            namespace,
            env,
            log,
        )
    }

    /// Starts `binary` (a `gpu-operator` build) with log level `log_level` and the chart's
    /// [`MALLOC_ENV`] (`env` may override it); see [`Self::start`].
    pub fn spawn(
        binary: &Path,
        log_level: &str,
        kubeconfig: &Path,
        namespace: &str,
        env: &[(&str, &str)],
        log: &Path,
    ) -> anyhow::Result<Self> {
        let args = [
            "run",
            "--leader-elect",
            "--log-level",
            log_level,
            "--kubeconfig={kubeconfig}",
            "--health-probe-bind-address=127.0.0.1:{probe_port}",
            "--metrics-bind-address=127.0.0.1:{metrics_port}",
        ]
        .map(str::to_owned);
        let env: Vec<(&str, &str)> = MALLOC_ENV.iter().chain(env).copied().collect();
        Self::spawn_args(binary, &args, kubeconfig, namespace, &env, log)
    }

    /// Starts any operator `binary` with `args`, in which `{kubeconfig}`, `{probe_port}` and
    /// `{metrics_port}` are replaced by the kubeconfig's path and two free ports (for a binary
    /// whose flags differ from ours); the environment is `env` plus `OPERATOR_NAMESPACE`.
    pub fn spawn_args(
        binary: &Path,
        args: &[String],
        kubeconfig: &Path,
        namespace: &str,
        env: &[(&str, &str)],
        log: &Path,
    ) -> anyhow::Result<Self> {
        let [probe_port, metrics_port] = free_ports()?;
        let args: Vec<String> = args
            .iter()
            .map(|arg| {
                arg.replace("{kubeconfig}", &kubeconfig.display().to_string())
                    .replace("{probe_port}", &probe_port.to_string())
                    .replace("{metrics_port}", &metrics_port.to_string())
            })
            .collect();
        let out = fs::File::options().create(true).append(true).open(log)?;
        let child = Command::new(binary)
            .args(&args)
            .env("OPERATOR_NAMESPACE", namespace)
            .env_remove("KUBECONFIG")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        Ok(Self {
            child,
            log: log.to_owned(),
            probe_port,
            metrics_port,
        })
    }

    /// Stops it with SIGTERM (graceful shutdown) and waits up to 20 s; returns how long it took
    /// to exit.
    pub fn stop(mut self) -> anyhow::Result<Duration> {
        self.terminate()
    }

    fn terminate(&mut self) -> anyhow::Result<Duration> {
        if self.child.try_wait()?.is_some() {
            return Ok(Duration::ZERO);
        }
        let sent = std::time::Instant::now();
        Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()?;
        for _ in 0..200 {
            if self.child.try_wait()?.is_some() {
                return Ok(sent.elapsed());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        self.child.kill()?;
        bail!("the operator did not exit within 20 s of SIGTERM")
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The last lines of its log.
    pub fn log_tail(&self) -> String {
        let text = fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        let _ = self.terminate();
    }
}

/// One request from the API server's audit log (a mutating one, or a LIST).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Write {
    /// `create`, `update`, `patch`, `delete`, …
    pub verb: String,
    /// Resource (and subresource), such as `daemonsets` or `clusterpolicies/status`.
    pub resource: String,
    /// Object name.
    pub name: String,
    /// HTTP status of the response, such as 200 or 409 (0 when the log has none).
    pub code: u16,
    /// The request's `fieldManager` parameter (who wrote, for server-side apply), if any.
    pub field_manager: Option<String>,
    /// When the API server received the request (its completion is the time beside it).
    pub received: Option<Timestamp>,
}

/// The harness API server's audit log (beside the kubeconfig, in `logs/audit.log`).
pub fn audit_log() -> anyhow::Result<PathBuf> {
    audit_log_beside(&kubeconfig_path()?)
}

/// The audit log of the harness cluster whose admin kubeconfig is `kubeconfig`.
pub fn audit_log_beside(kubeconfig: &Path) -> anyhow::Result<PathBuf> {
    let path = kubeconfig
        .parent()
        .context("kubeconfig has no directory")?
        .join("logs/audit.log");
    if !path.is_file() {
        bail!(
            "no audit log at {}: the write-counting tests need the local cluster of `cargo xtask cluster up`",
            path.display()
        );
    }
    Ok(path)
}

/// Mutating requests by `user` that completed after `since`.
pub fn writes_by(user: &str, since: Timestamp) -> anyhow::Result<Vec<Write>> {
    Ok(writes_in(&audit_log()?, user, since)?
        .into_iter()
        .map(|(_, write)| write)
        .collect())
}

/// Mutating requests by `user` in the audit log at `log` that completed after `since`, with the
/// time each completed, in log order. The API server rotates its audit log every 100 MB (a large
/// fleet's heartbeats fill that in minutes) and keeps the older parts beside it, named
/// `audit-<time>.log`: they are read too, oldest first.
pub fn writes_in(
    log: &Path,
    user: &str,
    since: Timestamp,
) -> anyhow::Result<Vec<(Timestamp, Write)>> {
    requests_in(log, user, since, |verb| MUTATING.contains(&verb))
}

/// LIST requests by `user` in the audit log at `log` that completed after `since` (the harness
/// logs them for ServiceAccounts: a watch that resumes needs none, a relist one each).
pub fn lists_in(
    log: &Path,
    user: &str,
    since: Timestamp,
) -> anyhow::Result<Vec<(Timestamp, Write)>> {
    requests_in(log, user, since, |verb| verb == "list")
}

/// Every request by `user` in the audit log at `log` that completed after `since`, whatever its
/// verb, with its status (a 429 is one API Priority and Fairness refused). The harness records
/// every request only of the throttled chaos scenario's ServiceAccount.
pub fn requests_of(
    log: &Path,
    user: &str,
    since: Timestamp,
) -> anyhow::Result<Vec<(Timestamp, Write)>> {
    requests_in(log, user, since, |_| true)
}

/// The verbs that change objects.
const MUTATING: [&str; 5] = ["create", "update", "patch", "delete", "deletecollection"];

fn requests_in(
    log: &Path,
    user: &str,
    since: Timestamp,
    keep: impl Fn(&str) -> bool,
) -> anyhow::Result<Vec<(Timestamp, Write)>> {
    let mut requests = Vec::new();
    for part in audit_log_parts(log)? {
        requests_in_part(&part, user, since, &keep, &mut requests)?;
    }
    Ok(requests)
}

/// The rotated parts of the audit log at `log`, oldest first (their names sort by time), then `log`.
fn audit_log_parts(log: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let stem = log.file_stem().and_then(|s| s.to_str()).unwrap_or("audit");
    let rotated_prefix = format!("{stem}-");
    let mut parts: Vec<PathBuf> = match log.parent() {
        Some(dir) => fs::read_dir(dir)?
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|path| {
                path.extension().is_some_and(|e| e == "log")
                    && path
                        .file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with(&rotated_prefix))
            })
            .collect(),
        None => Vec::new(),
    };
    parts.sort();
    parts.push(log.to_owned());
    Ok(parts)
}

fn requests_in_part(
    log: &Path,
    user: &str,
    since: Timestamp,
    keep: &impl Fn(&str) -> bool,
    requests: &mut Vec<(Timestamp, Write)>,
) -> anyhow::Result<()> {
    let file = fs::File::open(log)?;
    for line in std::io::BufReader::new(file).lines() {
        let line = line?;
        // The log holds every write of the cluster (kwok's node heartbeats too): skip the others
        // before paying for a JSON parse.
        if !line.contains(user) {
            continue;
        }
        let Ok(event) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        if event["user"]["username"] != user
            || event["stage"] != "ResponseComplete"
            || !keep(event["verb"].as_str().unwrap_or_default())
        {
            continue;
        }
        let Some(at) = event["stageTimestamp"]
            .as_str()
            .and_then(|t| t.parse::<Timestamp>().ok())
        else {
            continue;
        };
        if at <= since {
            continue;
        }
        let object = &event["objectRef"];
        let mut resource = object["resource"].as_str().unwrap_or_default().to_owned();
        if let Some(sub) = object["subresource"].as_str() {
            resource = format!("{resource}/{sub}");
        }
        let write = Write {
            verb: event["verb"].as_str().unwrap_or_default().to_owned(),
            resource,
            name: object["name"].as_str().unwrap_or_default().to_owned(),
            code: event["responseStatus"]["code"]
                .as_u64()
                .and_then(|c| u16::try_from(c).ok())
                .unwrap_or_default(),
            field_manager: event["requestURI"].as_str().and_then(field_manager_of),
            received: event["requestReceivedTimestamp"]
                .as_str()
                .and_then(|t| t.parse::<Timestamp>().ok()),
        };
        requests.push((at, write));
    }
    Ok(())
}

/// The `fieldManager` query parameter of a request URI.
fn field_manager_of(uri: &str) -> Option<String> {
    let (_, query) = uri.split_once('?')?;
    query
        .split('&')
        .find_map(|pair| pair.strip_prefix("fieldManager="))
        .map(|name| name.replace("%2F", "/").replace("%2f", "/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_field_manager_is_read_from_the_request_uri() {
        assert_eq!(
            field_manager_of(
                "/apis/nvidia.com/v1/clusterpolicies/p/status?fieldManager=gpu-operator%2Fstatus&force=true"
            )
            .as_deref(),
            Some("gpu-operator/status")
        );
        assert_eq!(field_manager_of("/api/v1/nodes/n?force=true"), None);
        assert_eq!(field_manager_of("/api/v1/nodes/n"), None);
    }

    fn entry(user: &str, at: &str, name: &str) -> String {
        json!({
            "stage": "ResponseComplete", "stageTimestamp": at, "verb": "patch",
            "user": {"username": user},
            "objectRef": {"resource": "nodes", "name": name},
            "responseStatus": {"code": 200}
        })
        .to_string()
    }

    #[test]
    fn the_rotated_parts_of_the_audit_log_are_read_oldest_first() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("audit.log");
        let op = "system:serviceaccount:gpu-operator:gpu-operator";
        let write = |file: &str, lines: &[String]| {
            fs::write(dir.path().join(file), lines.join("\n") + "\n").unwrap();
        };
        write(
            "audit-2026-11-22T11-00-00.000.log",
            &[entry(op, "2026-11-22T10:59:00Z", "a")],
        );
        write(
            "audit-2026-11-22T11-10-00.000.log",
            &[
                entry(op, "2026-11-22T11:05:00Z", "b"),
                entry("kwok", "2026-11-22T11:05:01Z", "x"),
            ],
        );
        write("audit.log", &[entry(op, "2026-11-22T11:15:00Z", "c")]);
        write(
            "kube-apiserver.log",
            &[entry(op, "2026-11-22T11:15:00Z", "not-audit")],
        );
        let since: Timestamp = "2026-11-22T10:00:00Z".parse().unwrap();
        let names: Vec<String> = writes_in(&log, op, since)
            .unwrap()
            .into_iter()
            .map(|(_, w)| w.name)
            .collect();
        assert_eq!(names, ["a", "b", "c"]);
    }
}
