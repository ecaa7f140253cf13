//! What NVIDIA's users bring, against the real API server with our CRD: every sample
//! ClusterPolicy of NVIDIA's releases (`../shared/fixtures/nvidia/clusterpolicies`) passes
//! `kubectl apply --dry-run=server --validate=strict` with no field pruned, and everything our
//! chart renders from each of NVIDIA's nine values files, unedited, passes the same server-side
//! dry run: every object, the ClusterPolicy with no field pruned.
#![cfg(feature = "e2e")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::{io::Write as _, path::PathBuf, process::Stdio};

use gpu_operator_harness::{
    access::kubectl,
    chart::{chart_dir, helm_ok},
    crd::{ensure_crd, repo_root},
    unique_name,
};
use serde_json::Value;

fn fixtures(kind: &str) -> Vec<PathBuf> {
    let dir = repo_root().join("../shared/fixtures/nvidia").join(kind);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e} (the shared NVIDIA fixtures)", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

/// `kubectl apply --dry-run=server --validate=strict -o json` of `yaml` (each object in its own
/// namespace): the objects as the API server would store them, or its error.
fn dry_run(yaml: &str) -> Result<Vec<Value>, String> {
    let mut child = kubectl()
        .args([
            "apply",
            "--dry-run=server",
            "--validate=strict",
            "-o",
            "json",
            "-f",
            "-",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(yaml.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr).into_owned());
    }
    let out: Value = serde_json::from_slice(&output.stdout).unwrap();
    Ok(match out["kind"].as_str() {
        Some("List") => out["items"].as_array().unwrap().clone(),
        _ => vec![out],
    })
}

/// Paths of `sent` missing or different in `stored` (what the API server pruned or changed).
fn pruned(sent: &Value, stored: &Value, path: &str, out: &mut Vec<String>) {
    match (sent, stored) {
        (Value::Object(s), Value::Object(t)) => {
            for (key, value) in s {
                let child = t.get(key).unwrap_or(&Value::Null);
                pruned(value, child, &format!("{path}.{key}"), out);
            }
        }
        (s, t) if s == t => {}
        (s, t) => out.push(format!("{path}: sent {s}, stored {t}")),
    }
}

fn yaml_docs(text: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .filter(|d: &Value| !d.is_null())
        .collect()
}

#[tokio::test]
async fn nvidias_sample_cluster_policies_are_accepted_with_no_field_pruned() {
    ensure_crd().await.unwrap();
    let files = fixtures("clusterpolicies");
    assert_eq!(files.len(), 4, "{files:?}");
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let sent = yaml_docs(&text).remove(0);
        let stored = dry_run(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let mut out = Vec::new();
        pruned(&sent["spec"], &stored[0]["spec"], "spec", &mut out);
        assert!(out.is_empty(), "{}: {out:#?}", file.display());
    }
}

#[tokio::test]
async fn the_chart_renders_each_nvidia_values_file_into_objects_the_api_server_accepts() {
    ensure_crd().await.unwrap();
    let files = fixtures("values");
    assert_eq!(files.len(), 9, "{files:?}");
    let namespace = unique_name("nvidia-values");
    gpu_operator_harness::access::kubectl_ok(&["create", "namespace", &namespace]).unwrap();
    for file in files {
        let chart = chart_dir();
        let rendered = helm_ok(&[
            "template",
            "gpu-operator",
            chart.to_str().unwrap(),
            "-n",
            &namespace,
            "-f",
            file.to_str().unwrap(),
        ])
        .unwrap();
        // Hook Jobs and their RBAC included: everything `helm install` would create.
        let sent = yaml_docs(&rendered);
        let stored = dry_run(&rendered).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert_eq!(stored.len(), sent.len(), "{}", file.display());
        let policy = |docs: &[Value]| {
            docs.iter()
                .find(|d| d["kind"] == "ClusterPolicy")
                .unwrap()
                .clone()
        };
        let mut out = Vec::new();
        pruned(
            &policy(&sent)["spec"],
            &policy(&stored)["spec"],
            "spec",
            &mut out,
        );
        assert!(out.is_empty(), "{}: {out:#?}", file.display());
    }
    gpu_operator_harness::access::kubectl_ok(&["delete", "namespace", &namespace, "--wait=false"])
        .unwrap();
}

/// `helm install --dry-run=client` of the chart with `args`: the release notes.
fn notes(args: &[&str]) -> String {
    let chart = chart_dir();
    let mut all = vec![
        "install",
        "gpu-operator",
        chart.to_str().unwrap(),
        "--dry-run=client",
        "-n",
        "gpu-operator",
    ];
    all.extend(args);
    let out = helm_ok(&all).unwrap();
    out.split_once("NOTES:")
        .map(|(_, notes)| notes.to_owned())
        .unwrap_or_default()
}

#[test]
fn removed_nvidia_keys_are_accepted_and_named_once_in_the_install_notes() {
    let files = fixtures("values");
    // v23.3.2 still had every one of these (the fixture shows them); v26.7.0 none. Both unedited.
    let oldest = &files[0];
    assert!(oldest.ends_with("v23.3.2.yaml"), "{}", oldest.display());
    let text = notes(&["-f", oldest.to_str().unwrap()]);
    assert!(
        text.contains("names NVIDIA's operator (a values file written for NVIDIA's chart): this chart runs its own operator image instead, ghcr.io/gpu-operator-rs/gpu-operator:"),
        "no line on NVIDIA's operator coordinates in:\n{text}"
    );
    for key in [
        "psp.enabled",
        "operator.initContainer",
        "operator.defaultRuntime",
        "cdi.default",
        "dcgm.hostPort",
    ] {
        assert_eq!(
            text.matches(&format!("  - {key}:")).count(),
            1,
            "{key} not named once in:\n{text}"
        );
    }
    let latest = files.iter().find(|f| f.ends_with("v26.7.0.yaml")).unwrap();
    let text = notes(&["-f", latest.to_str().unwrap()]);
    assert!(text.contains("logs deploy/gpu-operator"), "{text}");
    assert!(
        !text.contains("Deprecated"),
        "v26.7.0 has no removed key:\n{text}"
    );
    let text = notes(&["--set", "driver.useOpenKernelModules=true"]);
    assert!(
        text.contains("driver.useOpenKernelModules: use driver.kernelModuleType"),
        "{text}"
    );
}
