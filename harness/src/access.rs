//! How a test reaches the cluster: a kube client and the matching `kubectl`, plus small waiting helpers.

use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::atomic::{AtomicU32, Ordering},
    time::Duration,
};

use anyhow::{Context as _, bail};
use kube::config::{KubeConfigOptions, Kubeconfig};

/// Environment variable naming the directory with the harness's `kubectl` and `helm` builds.
pub const BIN_DIR_ENV: &str = "GPU_OPERATOR_E2E_BIN_DIR";

/// The kubeconfig the tests use: `$KUBECONFIG`, which `cargo xtask e2e` always sets.
pub fn kubeconfig_path() -> anyhow::Result<PathBuf> {
    std::env::var_os("KUBECONFIG").map(PathBuf::from).context(
        "KUBECONFIG is not set: run the e2e tests with `cargo xtask e2e`, or `cargo xtask cluster up` and export what it prints",
    )
}

/// A client for the test cluster, built from [`kubeconfig_path`].
pub async fn client() -> anyhow::Result<kube::Client> {
    client_for(&kubeconfig_path()?).await
}

/// A client for the cluster of the kubeconfig at `path`.
pub async fn client_for(path: &Path) -> anyhow::Result<kube::Client> {
    let kubeconfig = Kubeconfig::read_from(path)
        .with_context(|| format!("reading kubeconfig {}", path.display()))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .context("building a client config from the kubeconfig")?;
    Ok(kube::Client::try_from(config)?)
}

/// A client for the test cluster that authenticates with a bearer `token` (e.g. a ServiceAccount
/// token from the TokenRequest API) instead of the admin certificate.
pub async fn client_with_token(token: &str) -> anyhow::Result<kube::Client> {
    let path = kubeconfig_path()?;
    let kubeconfig = Kubeconfig::read_from(&path)
        .with_context(|| format!("reading kubeconfig {}", path.display()))?;
    // Swap every user's credentials for the token, keeping server and CA.
    let mut value = serde_json::to_value(&kubeconfig)?;
    if let Some(users) = value.get_mut("users").and_then(|u| u.as_array_mut()) {
        for user in users {
            user["user"] = serde_json::json!({ "token": token });
        }
    }
    let kubeconfig: Kubeconfig = serde_json::from_value(value)?;
    let config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    Ok(kube::Client::try_from(config)?)
}

/// A `kubectl` command for the test cluster: the harness's own build when
/// `GPU_OPERATOR_E2E_BIN_DIR` is set (the version matches the API server), else the one on `PATH`.
pub fn kubectl() -> Command {
    let program = std::env::var_os(BIN_DIR_ENV).map_or_else(
        || PathBuf::from("kubectl"),
        |dir| PathBuf::from(dir).join("kubectl"),
    );
    Command::new(program)
}

/// Runs a `kubectl` command with the given arguments and returns its stdout; fails with stderr.
pub fn kubectl_ok(args: &[&str]) -> anyhow::Result<String> {
    let output = kubectl().args(args).output().context("running kubectl")?;
    if !output.status.success() {
        bail!(
            "kubectl {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// A name unique to this test process, for objects a test creates and deletes again.
pub fn unique_name(prefix: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}-{}-{n}", std::process::id())
}

/// Polls `check` every 200 ms until it returns `Some`, or fails after `timeout` naming `what`.
pub async fn wait_until<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = check().await? {
            return Ok(value);
        }
        if tokio::time::Instant::now() >= deadline {
            bail!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
