//! The chart as GitOps tools use it: as a subchart of an umbrella chart (Helm passes `global:`
//! and the `enabled` key of its `condition`),
//! through a kustomize post-renderer, read by a YAML parser that rejects duplicate keys, and with
//! NVIDIA's object names whatever the release name (`nameOverride`/`fullnameOverride` as NVIDIA's
//! helpers take them). Needs the harness's helm (and kubectl for kustomize).

use std::path::Path;

use serde_json::Value;

use crate::chart::{
    CHART_DIR, helm, template,
    tests::nvidia_values::{render_docs, yaml_docs},
};
use crate::codegen::workspace_root;

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("gpu-operator-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Values that make every template render something.
const EVERY_TEMPLATE: [&str; 6] = [
    "--set",
    "operator.cleanupCRD=true,operator.cleanupNodeLabels=true,operator.metrics.serviceMonitor.enabled=true,devicePlugin.config.create=true,devicePlugin.config.name=plugin-config,migManager.config.create=true,migManager.config.name=mig-config,dcgmExporter.config.create=true,dcgmExporter.config.name=metrics,extraObjects[0].apiVersion=v1,extraObjects[0].kind=ConfigMap,extraObjects[0].metadata.name=extra,healthCheck.nodeHealthCheck.enabled=true,driver.nvidiaDriverCRD.enabled=true,gpuCluster.deployCR=true",
    "--set-string",
    "devicePlugin.config.data.any=version: v1,migManager.config.data.config\\.yaml=version: v1,dcgmExporter.config.data=DCGM_FI_DEV_GPU_UTIL\\, gauge\\, util",
    "--api-versions",
    "monitoring.coreos.com/v1/ServiceMonitor",
];

/// An umbrella chart with this chart as a dependency under the usual
/// `condition: gpu-operator.enabled`, rendered with `umbrella_values`.
fn render_umbrella(umbrella_values: &str) -> Vec<Value> {
    let umbrella = scratch("umbrella");
    std::fs::write(
        umbrella.join("Chart.yaml"),
        "apiVersion: v2\nname: platform\nversion: 1.0.0\ndependencies:\n  - name: gpu-operator\n    version: \">=0.0.0-0\"\n    condition: gpu-operator.enabled\n",
    )
    .unwrap();
    std::fs::write(umbrella.join("values.yaml"), umbrella_values).unwrap();
    copy_dir(
        &workspace_root().join(CHART_DIR),
        &umbrella.join("charts/gpu-operator"),
    );
    yaml_docs(&template(&umbrella, "platform", "gpu-operator", &[]).unwrap())
}

#[test]
#[ignore = "runs helm: `cargo xtask cluster up` builds it, `cargo xtask ci` runs this"]
fn works_as_a_subchart_of_an_umbrella_chart_with_its_condition_globals_and_a_nested_override() {
    // Helm hands the subchart its `enabled` key and the umbrella's `global:`.
    let docs = render_umbrella(
        "global:\n  imageRegistry: registry.local\ngpu-operator:\n  enabled: true\n  mig:\n    strategy: mixed\n  driver:\n    upgradePolicy:\n      maxParallelUpgrades: 3\n",
    );
    let policy = docs
        .iter()
        .find(|d| d["kind"] == "ClusterPolicy")
        .expect("no ClusterPolicy rendered");
    let spec = &policy["spec"];
    assert_eq!(
        spec["mig"]["strategy"], "mixed",
        "the umbrella's values did not arrive"
    );
    assert_eq!(spec["driver"]["upgradePolicy"]["maxParallelUpgrades"], 3);
    // The nested override keeps the chart's other defaults of the same section (values.yaml:
    // driver.upgradePolicy.autoUpgrade: true, driver.enabled: true).
    assert_eq!(spec["driver"]["upgradePolicy"]["autoUpgrade"], true);
    assert_eq!(spec["driver"]["enabled"], true);

    let disabled = render_umbrella("gpu-operator:\n  enabled: false\n");
    assert!(
        disabled.iter().all(|d| d["kind"] != "ClusterPolicy"),
        "the condition did not turn the subchart off"
    );
}

#[test]
#[ignore = "runs helm: `cargo xtask cluster up` builds it, `cargo xtask ci` runs this"]
fn every_template_renders_without_duplicate_keys() {
    let chart = workspace_root().join(CHART_DIR);
    let yaml = template(&chart, "gpu-operator", "gpu-operator", &EVERY_TEMPLATE).unwrap();
    let mut sources = std::collections::BTreeSet::new();
    for document in yaml.split("\n---") {
        if let Some(source) = document
            .lines()
            .find_map(|l| l.strip_prefix("# Source: gpu-operator/templates/"))
        {
            sources.insert(source.to_owned());
        }
        // serde_yaml refuses a mapping with a key twice ("duplicate entry with key").
        if let Err(e) = serde_yaml::from_str::<serde_yaml::Value>(document) {
            panic!("{e}:\n{document}");
        }
    }
    let mut templates: Vec<String> = std::fs::read_dir(chart.join("templates"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| Path::new(n).extension().is_some_and(|e| e == "yaml"))
        .collect();
    templates.sort();
    let missing: Vec<_> = templates.iter().filter(|t| !sources.contains(*t)).collect();
    // validate.yaml only fails or renders nothing.
    assert_eq!(missing, [&"validate.yaml".to_owned()], "not exercised");
}

#[test]
fn the_duplicate_key_check_refuses_a_duplicate() {
    // Positive control of the parser the test above relies on.
    let error = serde_yaml::from_str::<serde_yaml::Value>("a: 1\nb: 2\na: 3\n").unwrap_err();
    assert!(error.to_string().contains("duplicate"), "{error}");
}

#[test]
#[ignore = "runs helm: `cargo xtask cluster up` builds it, `cargo xtask ci` runs this"]
fn the_output_survives_a_kustomize_post_renderer() {
    let dir = scratch("kustomize");
    let script = dir.join("kustomize.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\nset -e\nd=$(mktemp -d)\ncat > \"$d/all.yaml\"\nprintf 'resources: [all.yaml]\\ncommonAnnotations:\\n  team: gpu\\n' > \"$d/kustomization.yaml\"\nkubectl kustomize \"$d\"\n",
    )
    .unwrap();
    let mut permissions = std::fs::metadata(&script).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(&script, permissions).unwrap();
    let plain = render_docs("gpu-operator", &EVERY_TEMPLATE);
    let mut args = EVERY_TEMPLATE.to_vec();
    args.extend(["--post-renderer", script.to_str().unwrap()]);
    let kustomized = render_docs("gpu-operator", &args);
    let names = |docs: &[Value]| {
        let mut names: Vec<String> = docs
            .iter()
            .map(|d| format!("{}/{}", d["kind"], d["metadata"]["name"]))
            .collect();
        names.sort();
        names
    };
    assert_eq!(names(&kustomized), names(&plain));
    // Helm post-renders the release's objects; hooks (the CRD and cleanup Jobs) it keeps apart.
    let (hooks, objects): (Vec<&Value>, Vec<&Value>) = kustomized
        .iter()
        .partition(|d| d["metadata"]["annotations"]["helm.sh/hook"].is_string());
    assert!(!hooks.is_empty() && objects.len() > 10);
    let untouched: Vec<_> = objects
        .iter()
        .filter(|d| d["metadata"]["annotations"]["team"] != "gpu")
        .map(|d| format!("{}/{}", d["kind"], d["metadata"]["name"]))
        .collect();
    assert!(
        untouched.is_empty(),
        "kustomize did not process {untouched:?}"
    );
}

fn name_of(docs: &[Value], kind: &str, component: &str) -> String {
    docs.iter()
        .find(|d| {
            d["kind"] == kind
                && (component.is_empty()
                    || d["metadata"]["labels"]["app.kubernetes.io/component"] == component)
        })
        .unwrap_or_else(|| panic!("no {kind}"))["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
#[ignore = "runs helm: `cargo xtask cluster up` builds it, `cargo xtask ci` runs this"]
fn nvidias_names_whatever_the_release_and_overrides_as_nvidias_helpers_take_them() {
    // (release, extra values, Deployment, Service, ClusterRole, app.kubernetes.io/name): a
    // hand-written table of NVIDIA's helpers (`gpu-operator.fullname`, `gpu-operator.name`).
    for (release, set, clusterrole, app_name) in [
        ("gpu-operator", "", "gpu-operator", "gpu-operator"),
        ("prod", "", "prod-gpu-operator", "gpu-operator"),
        ("gpu-operator-prod", "", "gpu-operator-prod", "gpu-operator"),
        ("prod", "nameOverride=gpus", "prod-gpus", "gpus"),
        (
            "prod",
            "fullnameOverride=fleet-gpus",
            "fleet-gpus",
            "gpu-operator",
        ),
    ] {
        let args: Vec<&str> = if set.is_empty() {
            vec![]
        } else {
            vec!["--set", set]
        };
        let docs = render_docs(release, &args);
        assert_eq!(
            name_of(&docs, "Deployment", "gpu-operator"),
            "gpu-operator",
            "{release} {set}"
        );
        assert_eq!(
            name_of(&docs, "Service", ""),
            "gpu-operator",
            "{release} {set}"
        );
        let role = docs
            .iter()
            .find(|d| {
                d["kind"] == "ClusterRole" && d["rules"].to_string().contains("clusterpolicies")
            })
            .unwrap();
        assert_eq!(role["metadata"]["name"], clusterrole, "{release} {set}");
        let deployment = docs.iter().find(|d| d["kind"] == "Deployment").unwrap();
        assert_eq!(
            deployment["metadata"]["labels"]["app.kubernetes.io/name"], app_name,
            "{release} {set}"
        );
    }
    // helm itself is what the test drives.
    assert!(helm().is_ok());
}
