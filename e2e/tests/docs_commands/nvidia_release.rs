//! A stand-in for a Helm release of NVIDIA's chart, for the migration page to start from: a chart
//! named `gpu-operator` (version v26.7.0) holding what such a release owns that the page deals
//! with: the operator's ServiceAccount and Deployment (NVIDIA's selector, image and name), a
//! worker DaemonSet of its node-feature-discovery subchart, and the ClusterPolicy as NVIDIA's
//! chart rendered it from its default values (from `e2e/fixtures/nvidia-v26.7.0`). Written by
//! this test from those facts; no template of NVIDIA's chart is in it.

use std::path::{Path, PathBuf};

use gpu_operator_e2e::nvidia_fixture::Fixture;
use serde_json::{Value, json};

use crate::{POLICY, RELEASE};

/// NVIDIA's operator image at the release the fixture comes from.
pub const OPERATOR_IMAGE: &str = "nvcr.io/nvidia/gpu-operator:v26.7.0";
/// The node-feature-discovery worker of NVIDIA's chart (subchart release name prefix).
pub const NFD_WORKER: &str = "gpu-operator-node-feature-discovery-worker";

/// Writes the chart into `dir/nvidia-gpu-operator` and returns its path.
pub fn write(dir: &Path, fixture: &Fixture) -> PathBuf {
    let chart = dir.join("nvidia-gpu-operator");
    std::fs::create_dir_all(chart.join("templates")).unwrap();
    std::fs::write(
        chart.join("Chart.yaml"),
        "apiVersion: v2\nname: gpu-operator\nversion: v26.7.0\nappVersion: v26.7.0\n",
    )
    .unwrap();
    let objects = [
        service_account(),
        deployment(),
        nfd_worker(),
        fixture.policy_manifest(POLICY),
    ];
    // As JSON, which is YAML too: Helm reads YAML 1.1, where a bare `on` (ccManager's default
    // mode) would be a boolean.
    let manifest = objects
        .iter()
        .map(|o| serde_json::to_string_pretty(o).unwrap())
        .collect::<Vec<_>>()
        .join("\n---\n");
    std::fs::write(chart.join("templates/release.yaml"), manifest).unwrap();
    chart
}

fn service_account() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": RELEASE},
    })
}

/// NVIDIA's operator Deployment: its selector (`app`, `app.kubernetes.io/component`) is not
/// ours, which is why the page deletes it before the upgrade.
fn deployment() -> Value {
    let labels = json!({"app": RELEASE, "app.kubernetes.io/component": RELEASE});
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": RELEASE, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": RELEASE,
                    "containers": [{
                        "name": RELEASE,
                        "image": OPERATOR_IMAGE,
                        "command": ["gpu-operator"],
                        "args": ["--leader-elect"],
                        "env": [{"name": "OPERATOR_NAMESPACE", "value": RELEASE}],
                    }],
                },
            },
        },
    })
}

fn nfd_worker() -> Value {
    let labels = json!({"app.kubernetes.io/name": "node-feature-discovery", "role": "worker"});
    json!({
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": NFD_WORKER, "labels": labels},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [{
                        "name": "worker",
                        "image": "registry.k8s.io/nfd/node-feature-discovery:v0.18.2",
                        "command": ["nfd-worker"],
                    }],
                },
            },
        },
    })
}
