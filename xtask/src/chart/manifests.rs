//! `manifests/gpu-operator.yaml`: the chart rendered with its default values, for
//! `kubectl apply -f manifests/` without Helm. It carries the Namespace and the CRDs first; Helm's
//! hook Jobs are left out (nothing runs them without Helm).

use std::path::Path;

use anyhow::Context as _;

use super::{CHART_DIR, template};

/// Where the static manifests go, relative to the workspace root.
pub const PATH: &str = "manifests/gpu-operator.yaml";
/// Namespace and release name of the static install.
const NAMESPACE: &str = "gpu-operator";

/// The static manifests, rendered from the chart under `root`.
pub fn render(root: &Path, header: &str) -> anyhow::Result<String> {
    let chart = root.join(CHART_DIR);
    let mut crds = Vec::new();
    for file in [
        "crds/clusterpolicies.nvidia.com.yaml",
        "crds/nvidiadrivers.nvidia.com.yaml",
        "crds/gpuclusters.nvidia.com.yaml",
        "crds/computedomains.resource.nvidia.com.yaml",
    ] {
        let crd = std::fs::read_to_string(chart.join(file))
            .with_context(|| format!("reading the chart's {file}"))?;
        crds.push(
            crd.lines()
                .filter(|l| !l.starts_with('#'))
                .collect::<Vec<_>>()
                .join("\n"),
        );
    }
    let crd = crds.join("\n---\n");
    let objects = template(&chart, NAMESPACE, NAMESPACE, &["--no-hooks"])
        .context("rendering the chart with default values")?;
    Ok(format!(
        "{header}# The chart with default values: kubectl apply --server-side -f manifests/gpu-operator.yaml\n\
         ---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: {NAMESPACE}\n---\n{crd}\n{objects}"
    ))
}
