//! The Helm chart in the e2e tests: `helm` (the harness's build, on `PATH` under `cargo xtask e2e`),
//! rendering parts of the chart, and the operator's identity taken from the chart — its
//! ServiceAccount, Role and ClusterRole applied into a test namespace, and a kubeconfig with a
//! TokenRequest token of that ServiceAccount — so the operator runs with exactly the chart's RBAC.

use std::{
    io::Write as _,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use anyhow::{Context as _, bail};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::{Api, api::PostParams};
use serde_json::json;

use crate::{
    access::{kubeconfig_path, kubectl, kubectl_ok},
    crd::repo_root,
};

/// The chart's directory.
pub fn chart_dir() -> PathBuf {
    repo_root().join("charts/gpu-operator")
}

/// A `helm` command for the test cluster (`KUBECONFIG` is inherited).
pub fn helm() -> Command {
    Command::new("helm")
}

/// Runs `helm args…`; returns stdout, or fails with stderr.
pub fn helm_ok(args: &[&str]) -> anyhow::Result<String> {
    let output = helm()
        .args(args)
        .output()
        .context("running helm (is the harness's helm on PATH? use `cargo xtask e2e`)")?;
    if !output.status.success() {
        bail!(
            "helm {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// `helm template <release> <chart> -n <namespace>` of the templates `show_only`, with `args`.
pub fn render(
    release: &str,
    namespace: &str,
    show_only: &[&str],
    args: &[&str],
) -> anyhow::Result<String> {
    let chart = chart_dir();
    let mut all = vec![
        "template",
        release,
        chart.to_str().context("chart path is not UTF-8")?,
        "--namespace",
        namespace,
    ];
    for template in show_only {
        all.extend(["--show-only", template]);
    }
    all.extend(args);
    helm_ok(&all)
}

/// `kubectl apply --server-side -f -` of `yaml`.
pub fn kubectl_apply(yaml: &str) -> anyhow::Result<()> {
    let mut child = kubectl()
        .args(["apply", "--server-side", "--force-conflicts", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("running kubectl apply")?;
    child
        .stdin
        .take()
        .context("no stdin")?
        .write_all(yaml.as_bytes())?;
    let output = child.wait_with_output()?;
    if !output.status.success() {
        bail!(
            "kubectl apply failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}

/// Templates holding the operator's ServiceAccount and RBAC.
pub const OPERATOR_RBAC: [&str; 3] = [
    "templates/serviceaccount.yaml",
    "templates/role.yaml",
    "templates/clusterrole.yaml",
];

/// Applies the chart's ServiceAccount, Role and ClusterRole of release `release` (its name must
/// contain `gpu-operator`, so the objects are named after it) into `namespace`, and returns a
/// kubeconfig authenticating as that ServiceAccount, with the user name the audit log shows.
pub async fn operator_kubeconfig(
    client: &kube::Client,
    namespace: &str,
    release: &str,
    dir: &Path,
) -> anyhow::Result<(PathBuf, String)> {
    kubectl_apply(&render(release, namespace, &OPERATOR_RBAC, &[])?)
        .context("applying the chart's operator RBAC")?;
    token_kubeconfig(client, namespace, release, dir).await
}

/// Deletes the cluster-scoped and `default`-namespace RBAC of release `release` that
/// [`operator_kubeconfig`] applied (the rest goes with the test namespace).
pub fn remove_operator_rbac(release: &str) {
    for (kind, namespace) in [
        ("clusterrolebinding", None),
        ("clusterrole", None),
        ("rolebinding", Some("default")),
        ("role", Some("default")),
    ] {
        let name = if namespace.is_some() {
            format!("{release}-events")
        } else {
            release.to_owned()
        };
        let mut args = vec!["delete", kind, &name, "--ignore-not-found"];
        if let Some(namespace) = namespace {
            args.extend(["-n", namespace]);
        }
        let _ = kubectl_ok(&args);
    }
}

/// A kubeconfig for the test cluster that authenticates with a fresh TokenRequest token of
/// ServiceAccount `namespace/name`; returns its path and the audit log's user name.
pub async fn token_kubeconfig(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    dir: &Path,
) -> anyhow::Result<(PathBuf, String)> {
    token_kubeconfig_from(&kubeconfig_path()?, client, namespace, name, dir).await
}

/// [`token_kubeconfig`] for the cluster of the admin kubeconfig `admin`.
pub async fn token_kubeconfig_from(
    admin: &Path,
    client: &kube::Client,
    namespace: &str,
    name: &str,
    dir: &Path,
) -> anyhow::Result<(PathBuf, String)> {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let request =
        serde_json::from_value(json!({"spec": {"audiences": [], "expirationSeconds": 7200}}))?;
    let token = accounts
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .with_context(|| format!("requesting a token of ServiceAccount {namespace}/{name}"))?
        .status
        .context("TokenRequest returned no token")?
        .token;
    let mut config = serde_json::to_value(kube::config::Kubeconfig::read_from(admin)?)?;
    if let Some(users) = config.get_mut("users").and_then(|u| u.as_array_mut()) {
        for user in users {
            user["user"] = json!({ "token": token });
        }
    }
    let path = dir.join(format!("{name}.kubeconfig"));
    std::fs::write(&path, serde_json::to_vec_pretty(&config)?)?;
    Ok((path, format!("system:serviceaccount:{namespace}:{name}")))
}
