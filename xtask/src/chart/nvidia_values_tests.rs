//! The chart against NVIDIA's own values files of nine releases (v23.3.2 … v26.7.0, read from
//! `../shared/fixtures/nvidia/values`): each renders once the operator image is ours, every key
//! the file sets arrives in the rendered ClusterPolicy (key by key), and the unchanged file fails
//! only on NVIDIA's operator image, saying what to remove. (The release notes naming removed keys
//! need a cluster for `helm install`: e2e `nvidia_compat`.) These tests need the harness's helm and fail with the
//! command that builds it when it is missing.

use std::path::{Path, PathBuf};

use gpu_operator_api::ClusterPolicy;
use serde_json::Value;

use super::{CHART_DIR, template};
use crate::codegen::workspace_root;

/// NVIDIA's values files, oldest first.
pub(super) fn nvidia_values_files() -> Vec<PathBuf> {
    let dir = workspace_root().join("../shared/fixtures/nvidia/values");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e} (the shared NVIDIA fixtures)", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort_by_key(|p| {
        let tag = p.file_stem().unwrap().to_string_lossy().into_owned();
        tag.trim_start_matches('v')
            .split('.')
            .map(|n| n.parse::<u32>().unwrap())
            .collect::<Vec<_>>()
    });
    assert_eq!(files.len(), 9, "nine NVIDIA releases: {files:?}");
    files
}

fn tag(path: &Path) -> String {
    path.file_stem().unwrap().to_string_lossy().into_owned()
}

/// `path` as JSON.
pub(super) fn read_yaml(path: &Path) -> Value {
    serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// NVIDIA's file with the one change the install error asks for: no `operator.repository`,
/// `operator.image` or `operator.version` (NVIDIA's operator image). Written to a temporary file.
pub(super) fn with_our_operator_image(path: &Path) -> PathBuf {
    let mut values = read_yaml(path);
    let operator = values["operator"].as_object_mut().unwrap();
    for key in ["repository", "image", "version"] {
        operator.remove(key);
    }
    let dir = std::env::temp_dir().join(format!("gpu-operator-chart-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join(format!("{}.yaml", tag(path)));
    // As JSON (valid YAML): re-serialised YAML would leave `"off"` unquoted, a YAML 1.1 boolean to helm.
    std::fs::write(&out, serde_json::to_string_pretty(&values).unwrap()).unwrap();
    out
}

/// Every document `helm template` renders with `args`; fails when helm fails or is not built.
pub(super) fn render_docs(release: &str, args: &[&str]) -> Vec<Value> {
    let chart = workspace_root().join(CHART_DIR);
    let yaml = template(&chart, release, "gpu-operator", args).unwrap();
    serde_yaml::Deserializer::from_str(&yaml)
        .map(|doc| serde::Deserialize::deserialize(doc).unwrap())
        .filter(|doc: &Value| !doc.is_null())
        .collect()
}

/// The rendered ClusterPolicy; fails unless every rendered key is a ClusterPolicy field.
pub(super) fn cluster_policy(docs: &[Value]) -> Value {
    let rendered = docs
        .iter()
        .find(|d| d["kind"] == "ClusterPolicy")
        .expect("no ClusterPolicy rendered")
        .clone();
    let policy: ClusterPolicy = serde_json::from_value(rendered.clone()).unwrap();
    let mut back = serde_json::to_value(&policy).unwrap();
    back["metadata"] = rendered["metadata"].clone();
    assert_eq!(
        back, rendered,
        "a rendered key is not a ClusterPolicy field"
    );
    rendered
}

/// Values keys NVIDIA's `clusterpolicy.yaml` never renders into the ClusterPolicy (a hand-written
/// list, from NVIDIA's template): chart switches and the operator Deployment's own settings.
const NOT_IN_THE_POLICY: &[&str] = &[
    "platform",
    "nfd",
    "clusterPolicy",
    "gpuCluster",
    "draDriver",
    "node-feature-discovery",
    "extraObjects",
    "operator.repository",
    "operator.image",
    "operator.version",
    "operator.imagePullPolicy",
    "operator.imagePullSecrets",
    "operator.env",
    "operator.priorityClassName",
    "operator.nodeSelector",
    "operator.cleanupCRD",
    "operator.upgradeCRD",
    "operator.tolerations",
    "operator.annotations",
    "operator.affinity",
    "operator.logging",
    "operator.resources",
    "operator.labels",
    // Rendered by NVIDIA only when true, on OpenShift, which this chart refuses.
    "operator.use_ocp_driver_toolkit",
    "driver.nvidiaDriverCRD",
    "devicePlugin.config.create",
    "devicePlugin.config.data",
    "migManager.config.create",
    "migManager.config.data",
    "dcgmExporter.config.create",
    "dcgmExporter.config.data",
];

/// Values keys NVIDIA's template renders under another name (with everything below them).
const RENAMED: &[(&str, &str)] = &[(
    "driver.upgradePolicy.gpuPodDeletion.",
    "driver.upgradePolicy.podDeletion.",
)];

/// Booleans NVIDIA's template renders only when true (false and absent mean the same).
const ONLY_WHEN_TRUE: &[&str] = &["cdi.nriPluginEnabled"];

/// Values NVIDIA's template quotes (so a number arrives as a string).
fn quoted(path: &str) -> bool {
    path.ends_with(".version")
        || [
            "daemonsets.rollingUpdate.maxUnavailable",
            "devicePlugin.config.name",
            "devicePlugin.config.default",
            "migManager.config.default",
        ]
        .contains(&path)
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

/// Collects, for every leaf the values set, where the ClusterPolicy spec differs. Empty values may
/// be absent from the policy (the CRD's defaults apply, as with NVIDIA's template).
pub(super) fn compare(values: &Value, spec: &Value, path: &str, out: &mut Vec<String>) {
    if NOT_IN_THE_POLICY.contains(&path) {
        return;
    }
    let target = RENAMED
        .iter()
        .find_map(|(from, to)| path.strip_prefix(from).map(|rest| format!("{to}{rest}")))
        .unwrap_or_else(|| path.to_owned());
    match values {
        Value::Object(map) if !map.is_empty() => {
            for (key, value) in map {
                let child = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                compare(value, spec, &child, out);
            }
        }
        leaf => {
            let mut actual = spec;
            for key in target.split('.') {
                actual = actual.get(key).unwrap_or(&Value::Null);
            }
            let expected = match leaf {
                Value::Number(n) if quoted(path) => Value::String(n.to_string()),
                other => other.clone(),
            };
            // An empty value sets nothing (the chart may add its own, as NVIDIA's adds labels).
            let unset_false = ONLY_WHEN_TRUE.contains(&path) && expected == Value::Bool(false);
            if actual == &expected || is_empty(&expected) || (actual.is_null() && unset_false) {
                return;
            }
            out.push(format!("{path}: values {expected}, policy {actual}"));
        }
    }
}

#[test]
fn every_nvidia_values_file_renders_and_what_it_sets_arrives_in_the_cluster_policy() {
    for file in nvidia_values_files() {
        let ours = with_our_operator_image(&file);
        let docs = render_docs("gpu-operator", &["-f", ours.to_str().unwrap()]);
        let policy = cluster_policy(&docs);
        let values = read_yaml(&file);
        let mut differences = Vec::new();
        compare(&values, &policy["spec"], "", &mut differences);
        assert!(differences.is_empty(), "{}: {differences:#?}", tag(&file));
        // NVIDIA's default nfd.enabled=true gives the discovery agent instead of NFD.
        assert!(
            docs.iter().any(|d| d["kind"] == "DaemonSet"
                && d["metadata"]["name"] == "gpu-operator-node-discovery"),
            "{}: no discovery agent",
            tag(&file)
        );
    }
}

#[test]
fn the_key_by_key_comparison_sees_a_value_that_does_not_arrive() {
    // Positive control of the comparison above: a value the template drops is reported.
    let values = serde_json::json!({"driver": {"version": 570, "enabled": true}, "operator": {"image": "x"}});
    let spec = serde_json::json!({"driver": {"version": "570"}});
    let mut out = Vec::new();
    compare(&values, &spec, "", &mut out);
    assert_eq!(out, ["driver.enabled: values true, policy null"]);
}

#[test]
fn an_unchanged_nvidia_values_file_fails_only_on_nvidias_operator_image() {
    for file in nvidia_values_files() {
        let chart = workspace_root().join(CHART_DIR);
        let error = template(
            &chart,
            "gpu-operator",
            "gpu-operator",
            &["-f", file.to_str().unwrap()],
        )
        .expect_err("NVIDIA's operator image was accepted")
        .to_string();
        assert!(
            error.contains("operator.repository=nvcr.io/nvidia")
                && error
                    .contains("Remove operator.repository, operator.image and operator.version"),
            "{}: {error}",
            tag(&file)
        );
    }
}
