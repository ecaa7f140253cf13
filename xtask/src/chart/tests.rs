//! Tests of the chart: versions, lint, what the default values render (a ClusterPolicy NVIDIA's
//! chart would render, an operator Deployment with its image fallbacks, RBAC without wildcards,
//! hook Jobs), and the install-time errors for typos and inconsistent values. The tests that run
//! helm are `#[ignore]`d for plain `cargo test` (helm is built with the local control plane) and
//! run by `cargo xtask ci`; run alone without helm, they fail with the command that builds it.

mod gitops;
mod gpu_cluster;
mod node_health_check;
mod nvidia_driver;
mod nvidia_values;
mod value_types;

use std::path::PathBuf;

use nvidia_values::{
    cluster_policy, compare, nvidia_values_files, read_yaml, render_docs, yaml_docs,
};
use serde_json::{Value, json};

use super::{CHART_DIR, helm, lint, template};
use crate::codegen::workspace_root;

fn chart() -> PathBuf {
    workspace_root().join(CHART_DIR)
}

/// Every document `helm template` renders with `args`; fails with the command that builds helm
/// when it is not built.
fn render(args: &[&str]) -> Vec<Value> {
    helm().unwrap();
    yaml_docs(&template(&chart(), "gpu-operator", "gpu-operator", args).unwrap())
}

/// The error `helm template` prints for `args`; fails with the command that builds helm when it
/// is not built.
fn render_error(args: &[&str]) -> String {
    helm().unwrap();
    let error = template(&chart(), "gpu-operator", "gpu-operator", args)
        .expect_err("the values were accepted");
    error.to_string()
}

fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} rendered"))
}

#[test]
fn chart_version_and_app_version_follow_the_workspace() {
    let text = std::fs::read_to_string(chart().join("Chart.yaml")).unwrap();
    let chart: Value = serde_yaml::from_str(&text).unwrap();
    let workspace = env!("CARGO_PKG_VERSION");
    assert_eq!(chart["version"], workspace, "Chart.yaml version");
    assert_eq!(chart["appVersion"], workspace, "Chart.yaml appVersion");
}

/// The defaults `values.yaml` repeats as data agree with the one copy each has in Rust, on its
/// API type: a default changed in one place only fails here.
#[test]
fn the_charts_default_values_agree_with_the_api_types() {
    use gpu_operator_api::spec::{HostPathsSpec, MigPartedConfigSpec, MpsConfig, ToolkitSpec};

    let text = std::fs::read_to_string(chart().join("values.yaml")).unwrap();
    let values: Value = serde_yaml::from_str(&text).unwrap();
    for (path, api) in [
        (
            "/migManager/config/default",
            MigPartedConfigSpec::DEFAULT_LAYOUT,
        ),
        ("/devicePlugin/mps/root", MpsConfig::DEFAULT_ROOT),
        ("/toolkit/installDir", ToolkitSpec::DEFAULT_INSTALL_DIR),
        ("/hostPaths/rootFS", HostPathsSpec::DEFAULT_ROOT_FS),
        (
            "/hostPaths/driverInstallDir",
            HostPathsSpec::DEFAULT_DRIVER_INSTALL_DIR,
        ),
    ] {
        assert_eq!(
            values.pointer(path).and_then(Value::as_str),
            Some(api),
            "values.yaml {path} and the API type's default disagree: change both"
        );
    }
}

#[test]
#[ignore = "runs helm: `cargo xtask cluster up` builds it, `cargo xtask ci` runs this"]
fn the_chart_lints_clean() {
    helm().unwrap();
    lint(&chart()).unwrap();
}

/// Chart parity, against NVIDIA's own values (v26.7.0, `../shared/fixtures/nvidia/values`): every
/// key NVIDIA's default values set arrives in the ClusterPolicy our defaults render, with NVIDIA's
/// value, except the hand-written list of deliberate differences below. Needs the harness's helm.
#[test]
#[ignore = "runs helm: `cargo xtask cluster up` builds it, `cargo xtask ci` runs this"]
fn default_values_render_the_cluster_policy_of_nvidias_chart() {
    let rendered = cluster_policy(&render_docs("gpu-operator", &[]));
    let mut nvidia = read_yaml(&nvidia_values_files().pop().unwrap());
    // Ours differ on purpose: the validator (and node status exporter) image is this project's,
    // and so is the operator's (not a ClusterPolicy key).
    for section in ["validator", "nodeStatusExporter"] {
        for key in ["repository", "image"] {
            nvidia[section].as_object_mut().unwrap().remove(key);
        }
    }
    let mut differences = Vec::new();
    compare(&nvidia, &rendered["spec"], "", &mut differences);
    assert!(
        differences.is_empty(),
        "differs from NVIDIA's v26.7.0 defaults: {differences:#?}"
    );
    assert_eq!(
        rendered["spec"]["validator"]["repository"],
        "ghcr.io/gpu-operator-rs"
    );
}

#[test]
#[ignore = "runs helm: `cargo xtask cluster up` builds it, `cargo xtask ci` runs this"]
fn no_rbac_rule_has_a_wildcard() {
    let docs = render(&[
        "--set",
        "operator.cleanupCRD=true,operator.cleanupNodeLabels=true,operator.metrics.serviceMonitor.enabled=true",
        "--api-versions",
        "monitoring.coreos.com/v1/ServiceMonitor",
    ]);
    let mut roles = 0;
    for doc in docs
        .iter()
        .filter(|d| d["kind"] == "Role" || d["kind"] == "ClusterRole")
    {
        roles += 1;
        for rule in doc["rules"].as_array().unwrap() {
            for field in ["apiGroups", "resources", "verbs", "resourceNames"] {
                for value in rule[field].as_array().into_iter().flatten() {
                    assert!(
                        !value.as_str().unwrap().contains('*'),
                        "{} {}: wildcard in {field}: {rule}",
                        doc["kind"],
                        doc["metadata"]["name"]
                    );
                }
            }
            assert!(rule["verbs"].as_array().is_some_and(|v| !v.is_empty()));
        }
    }
    assert_eq!(
        roles, 7,
        "operator Role + events Role + ClusterRole + 3 hook ClusterRoles + the discovery agent's ClusterRole"
    );
}

#[test]
#[ignore = "runs helm: `cargo xtask cluster up` builds it, `cargo xtask ci` runs this"]
fn the_deployment_runs_the_operator_with_nvidias_flags_and_image_fallbacks() {
    let docs = render(&[]);
    let deployment = find(&docs, "Deployment", "gpu-operator");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(
        &args[..4],
        [
            "run",
            "--leader-elect",
            "--metrics-bind-address=:8080",
            "--health-probe-bind-address=:8081"
        ]
    );
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    let env = container["env"].as_array().unwrap();
    assert_eq!(
        env[0],
        json!({"name": "OPERATOR_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}})
    );
    let images: Vec<&str> = env
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .filter(|n| n.ends_with("_IMAGE"))
        .collect();
    for name in &images {
        assert!(
            gpu_operator_operands::image_vars().contains(name),
            "{name} is not a variable the operator reads"
        );
    }
    assert!(images.contains(&"DEVICE_PLUGIN_IMAGE") && images.contains(&"VALIDATOR_IMAGE"));
    let validator = env.iter().find(|e| e["name"] == "VALIDATOR_IMAGE").unwrap();
    assert_eq!(
        validator["value"],
        "ghcr.io/gpu-operator-rs/gpu-operator:0.1.0"
    );
    assert!(
        !images.contains(&"VGPU_MANAGER_IMAGE"),
        "vgpuManager has no default image"
    );
    for (name, value) in gpu_operator_harness::operator::MALLOC_ENV {
        assert!(
            env.contains(&json!({"name": name, "value": value})),
            "the Deployment lacks {name}={value}, which the bench and e2e runs give the operator"
        );
    }
}

#[test]
#[ignore = "runs helm: `cargo xtask cluster up` builds it, `cargo xtask ci` runs this"]
fn hook_jobs_run_the_operator_binary() {
    let docs = render(&[
        "--set",
        "operator.cleanupCRD=true,operator.cleanupNodeLabels=true",
    ]);
    for (job, args, hook) in [
        (
            "gpu-operator-upgrade-crd",
            json!(["crds", "apply"]),
            "pre-install,pre-upgrade",
        ),
        (
            "gpu-operator-cleanup-crd",
            json!(["crds", "delete"]),
            "pre-delete",
        ),
        (
            "gpu-operator-cleanup-node-labels",
            json!(["cleanup-node-labels"]),
            "post-delete",
        ),
    ] {
        let rendered = find(&docs, "Job", job);
        assert_eq!(rendered["metadata"]["annotations"]["helm.sh/hook"], hook);
        let pod = &rendered["spec"]["template"]["spec"];
        assert_eq!(pod["containers"][0]["args"], args);
        assert_eq!(pod["serviceAccountName"], job);
        find(&docs, "ClusterRoleBinding", job);
    }
    let policy = find(&docs, "ClusterPolicy", "cluster-policy");
    assert_eq!(
        policy["metadata"]["annotations"]["helm.sh/resource-policy"],
        "keep"
    );
}

#[test]
#[ignore = "runs helm: `cargo xtask cluster up` builds it, `cargo xtask ci` runs this"]
fn the_node_cleanup_hook_is_on_by_default_with_only_the_verbs_it_needs() {
    let name = "gpu-operator-cleanup-node-labels";
    let docs = render(&[]);
    let job = find(&docs, "Job", name);
    assert_eq!(
        job["metadata"]["annotations"]["helm.sh/hook"],
        "post-delete"
    );
    // List the nodes, patch their labels, annotations and cordon, delete the validator's
    // conditions through the status subresource: nothing else.
    assert_eq!(
        find(&docs, "ClusterRole", name)["rules"],
        json!([
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "patch"]},
            {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]},
        ])
    );
    let off = render(&["--set", "operator.cleanupNodeLabels=false"]);
    assert!(
        !off.iter().any(|d| d["metadata"]["name"] == name),
        "operator.cleanupNodeLabels=false still renders the cleanup hook"
    );
}

#[test]
#[ignore = "runs helm: `cargo xtask cluster up` builds it, `cargo xtask ci` runs this"]
fn typos_and_invalid_values_fail_with_the_key_named() {
    for (set, named) in [
        ("mig.strategy=auto", "strategy"),
        ("devicePlugin.confg.name=x", "confg"),
        ("operatr.upgradeCRD=false", "operatr"),
        ("driver.upgradePolicy.podDeletion.force=true", "podDeletion"),
        ("daemonsets.updateStrategy=Sometimes", "updateStrategy"),
    ] {
        let error = render_error(&["--set", set]);
        assert!(error.contains(named), "--set {set}: {error}");
    }
}

#[test]
#[ignore = "runs helm: `cargo xtask cluster up` builds it, `cargo xtask ci` runs this"]
fn inconsistent_values_fail_with_nvidias_checks_and_ours() {
    for (set, expected) in [
        (
            "cdi.enabled=false,cdi.nriPluginEnabled=true",
            "cdi.nriPluginEnabled=true needs",
        ),
        (
            "toolkit.enabled=false,cdi.nriPluginEnabled=true",
            "toolkit.enabled=true",
        ),
        (
            "devicePlugin.config.create=true,devicePlugin.config.data.a=b",
            "needs devicePlugin.config.name",
        ),
        (
            "devicePlugin.config.create=true,devicePlugin.config.name=c",
            "needs devicePlugin.config.data",
        ),
        (
            "devicePlugin.config.create=true,devicePlugin.config.name=c,devicePlugin.config.data.a=b,devicePlugin.config.default=z",
            "is not a key of devicePlugin.config.data",
        ),
        (
            "migManager.config.create=true,migManager.config.name=m",
            "config.yaml",
        ),
        (
            "operator.metrics.serviceMonitor.enabled=true",
            "serves no monitoring.coreos.com/v1",
        ),
    ] {
        let error = render_error(&["--set", set]);
        assert!(error.contains(expected), "--set {set}: {error}");
    }
}

#[test]
#[ignore = "runs helm: `cargo xtask cluster up` builds it, `cargo xtask ci` runs this"]
fn a_device_plugin_config_is_created_and_referenced() {
    let docs = render(&[
        "--set",
        "devicePlugin.config.create=true,devicePlugin.config.name=time-slicing-config,devicePlugin.config.default=any",
        "--set-string",
        "devicePlugin.config.data.any=version: v1",
    ]);
    let config = find(&docs, "ConfigMap", "time-slicing-config");
    assert_eq!(config["data"]["any"], "version: v1");
    let policy = find(&docs, "ClusterPolicy", "cluster-policy");
    assert_eq!(
        policy["spec"]["devicePlugin"]["config"],
        json!({"name": "time-slicing-config", "default": "any"})
    );
}

#[test]
#[ignore = "runs helm: `cargo xtask cluster up` builds it, `cargo xtask ci` runs this"]
fn psa_lets_the_operator_label_its_own_namespace_and_no_other() {
    helm().unwrap();
    let yaml = template(&chart(), "gpu-operator", "gpu-ops", &[]).unwrap();
    let docs = yaml_docs(&yaml);
    // The operator's ClusterRole: the one that reads ClusterPolicies.
    let operator = docs
        .iter()
        .find(|d| {
            d["kind"] == "ClusterRole"
                && d["rules"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|r| r["resources"] == json!(["clusterpolicies"]))
        })
        .expect("no operator ClusterRole rendered");
    let namespace_rules: Vec<&Value> = docs
        .iter()
        .filter(|d| d["kind"] == "ClusterRole" || d["kind"] == "Role")
        .flat_map(|d| d["rules"].as_array().into_iter().flatten())
        .filter(|r| {
            r["resources"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|r| r == "namespaces")
        })
        .collect();
    // What NVIDIA's operator does with psa.enabled (a read, then a patch of the labels), on the
    // release namespace only.
    let wanted = json!({
        "apiGroups": [""],
        "resources": ["namespaces"],
        "resourceNames": ["gpu-ops"],
        "verbs": ["get", "patch"],
    });
    assert_eq!(namespace_rules, vec![&wanted], "{}", operator["rules"]);
    assert!(operator["rules"].as_array().unwrap().contains(&wanted));
}
