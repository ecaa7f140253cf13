//! The Helm chart (`charts/gpu-operator`): the harness-built `helm` it is rendered and linted with,
//! its generated values schema and the static manifests rendered from it.

pub mod manifests;
pub mod schema;
#[cfg(test)]
mod tests;

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, bail};

use crate::cluster::Layout;

/// The chart's directory, relative to the workspace root.
pub const CHART_DIR: &str = "charts/gpu-operator";

/// The harness's `helm` binary, if it has been built (`cargo xtask cluster up` builds it).
pub fn helm_binary() -> Option<PathBuf> {
    let helm = Layout::from_env().ok()?.helm_bin().join("helm");
    helm.is_file().then_some(helm)
}

/// The harness's `helm`, or an error that says how to build it.
pub fn helm() -> anyhow::Result<PathBuf> {
    helm_binary().context(
        "helm is not built yet: run `cargo xtask cluster up` once (it builds helm with the control plane)",
    )
}

/// `helm template <release> <chart> --namespace <namespace> <args>`: the rendered YAML, or the
/// error helm printed.
pub fn template(
    chart: &Path,
    release: &str,
    namespace: &str,
    args: &[&str],
) -> anyhow::Result<String> {
    let output = Command::new(helm()?)
        .args(["template", release])
        .arg(chart)
        .args(["--namespace", namespace])
        .args(args)
        .output()
        .context("running helm template")?;
    if !output.status.success() {
        bail!("{}", String::from_utf8_lossy(&output.stderr).trim());
    }
    Ok(String::from_utf8(output.stdout)?)
}

/// `helm lint --strict` of the chart: fails on any warning.
pub fn lint(chart: &Path) -> anyhow::Result<()> {
    let output = Command::new(helm()?)
        .args(["lint", "--strict"])
        .arg(chart)
        .output()
        .context("running helm lint")?;
    if !output.status.success() {
        bail!(
            "helm lint failed:\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(())
}
