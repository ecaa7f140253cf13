//! The chart against NVIDIA's own values files of nine releases (v23.3.2 … v26.7.0, read from
//! `../shared/fixtures/nvidia/values`): each renders unedited, NVIDIA's operator coordinates
//! (`nvcr.io/nvidia` `gpu-operator`) run this operator's image, and every key the file sets
//! arrives in the rendered ClusterPolicy (key by key); operator images that are neither NVIDIA's
//! coordinates nor this operator (another NVIDIA image, a mirror of NVIDIA's operator) are refused.
//! (The install notes need a cluster for `helm install`: e2e `nvidia_compat`.) These tests need
//! the harness's helm and fail with the command that builds it when it is missing.

use std::path::{Path, PathBuf};

use gpu_operator_api::ClusterPolicy;
use serde_json::Value;

use crate::chart::{CHART_DIR, template};
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

/// The non-empty documents of a multi-document YAML text.
pub(super) fn yaml_docs(yaml: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(yaml)
        .map(|doc| serde::Deserialize::deserialize(doc).unwrap())
        .filter(|doc: &Value| !doc.is_null())
        .collect()
}

/// Every document `helm template` renders with `args`; fails when helm fails or is not built.
pub(super) fn render_docs(release: &str, args: &[&str]) -> Vec<Value> {
    let chart = workspace_root().join(CHART_DIR);
    yaml_docs(&template(&chart, release, "gpu-operator", args).unwrap())
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

/// The images of the operator's own pods (its Deployment, the discovery agent, the hook Jobs).
fn operator_images(docs: &[Value]) -> Vec<(String, String)> {
    docs.iter()
        .filter(|d| ["Deployment", "DaemonSet", "Job"].contains(&d["kind"].as_str().unwrap_or("")))
        .map(|d| {
            let image = d["spec"]["template"]["spec"]["containers"][0]["image"]
                .as_str()
                .unwrap()
                .to_owned();
            (d["metadata"]["name"].as_str().unwrap().to_owned(), image)
        })
        .collect()
}

#[test]
#[ignore = "runs helm: `cargo xtask cluster up` builds it, `cargo xtask ci` runs this"]
fn every_nvidia_values_file_renders_unedited_and_what_it_sets_arrives_in_the_cluster_policy() {
    let ours = operator_images(&render_docs("gpu-operator", &[]));
    assert!(!ours.is_empty());
    for file in nvidia_values_files() {
        let docs = render_docs("gpu-operator", &["-f", file.to_str().unwrap()]);
        let policy = cluster_policy(&docs);
        let values = read_yaml(&file);
        assert_eq!(
            values["operator"]["repository"],
            "nvcr.io/nvidia",
            "{}",
            tag(&file)
        );
        let mut differences = Vec::new();
        compare(&values, &policy["spec"], "", &mut differences);
        assert!(differences.is_empty(), "{}: {differences:#?}", tag(&file));
        // NVIDIA's operator coordinates run this operator's image, as the default values do.
        let images = operator_images(&docs);
        for (name, image) in &images {
            let default = ours.iter().find(|(n, _)| n == name).map(|(_, i)| i);
            assert_eq!(Some(image), default, "{}: {name}", tag(&file));
        }
        // NVIDIA's default nfd.enabled=true gives the discovery agent instead of NFD.
        assert!(
            images
                .iter()
                .any(|(name, _)| name == "gpu-operator-node-discovery"),
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

/// The operator Deployment's image with `--set <set>`, or helm's error.
fn operator_image(set: &str) -> Result<String, String> {
    let chart = workspace_root().join(CHART_DIR);
    let yaml = template(&chart, "gpu-operator", "gpu-operator", &["--set", set])
        .map_err(|e| e.to_string())?;
    Ok(operator_images(&yaml_docs(&yaml))
        .into_iter()
        .find(|(name, _)| name == "gpu-operator")
        .expect("no operator Deployment")
        .1)
}

#[test]
#[ignore = "runs helm: `cargo xtask cluster up` builds it, `cargo xtask ci` runs this"]
fn nvidias_coordinates_run_this_operator_and_images_that_are_neither_are_refused() {
    let chart_yaml =
        std::fs::read_to_string(workspace_root().join(CHART_DIR).join("Chart.yaml")).unwrap();
    let app_version = chart_yaml
        .lines()
        .find_map(|l| l.strip_prefix("appVersion: "))
        .unwrap()
        .trim_matches('"');
    let ours = format!("ghcr.io/gpu-operator-rs/gpu-operator:{app_version}");
    assert_eq!(
        operator_image("operator.imagePullPolicy=IfNotPresent").unwrap(),
        ours
    );
    // NVIDIA's coordinates, with or without NVIDIA's tag, are this operator.
    for nvidia in [
        "operator.repository=nvcr.io/nvidia",
        "operator.repository=nvcr.io/nvidia,operator.image=gpu-operator,operator.version=v25.3.4",
    ] {
        assert_eq!(operator_image(nvidia).unwrap(), ours, "{nvidia}");
    }
    // A mirror of this operator (its own tag, or the chart's appVersion) renders as asked.
    assert_eq!(
        operator_image("operator.repository=registry.local/nvidia").unwrap(),
        format!("registry.local/nvidia/gpu-operator:{app_version}")
    );
    assert_eq!(
        operator_image("operator.repository=registry.local/gpu,operator.version=0.2.0").unwrap(),
        "registry.local/gpu/gpu-operator:0.2.0"
    );
    // A mirror of NVIDIA's operator (its image name and a vYY.M.P tag) is refused.
    let mirror =
        operator_image("operator.repository=registry.local/nvidia,operator.version=v25.10.1")
            .unwrap_err();
    assert!(
        mirror.contains("operator.version=v25.10.1 is a tag of NVIDIA's operator"),
        "{mirror}"
    );
    // Another image from NVIDIA's registry is neither.
    let other = operator_image(
        "operator.repository=nvcr.io/nvidia/cloud-native,operator.image=gpu-operator-validator",
    )
    .unwrap_err();
    assert!(other.contains("is neither NVIDIA's operator"), "{other}");
}
