//! Values given the way users type them for NVIDIA's chart: numbers where NVIDIA's templates quote
//! (`--set driver.version=570`), booleans and timeouts as strings (`--set-string`, old addon
//! scripts). Each is accepted and arrives in the ClusterPolicy with the CRD's type; real typos and
//! keys no NVIDIA release had are still refused with the key named. Needs the harness's helm.

use serde_json::{Value, json};

use crate::chart::{
    CHART_DIR, template,
    tests::nvidia_values::{cluster_policy, render_docs},
};
use crate::codegen::workspace_root;

fn policy(args: &[&str]) -> Value {
    cluster_policy(&render_docs("gpu-operator", args))["spec"].clone()
}

fn refused(args: &[&str]) -> String {
    let chart = workspace_root().join(CHART_DIR);
    template(&chart, "gpu-operator", "gpu-operator", args)
        .expect_err("the values were accepted")
        .to_string()
}

fn has(docs: &[Value], kind: &str, name: &str) -> bool {
    docs.iter()
        .any(|d| d["kind"] == kind && d["metadata"]["name"] == name)
}

#[test]
#[ignore = "runs helm: `cargo xtask cluster up` builds it, `cargo xtask ci` runs this"]
fn numbers_where_nvidia_quotes_become_strings() {
    let spec = policy(&[
        "--set",
        "daemonsets.rollingUpdate.maxUnavailable=2,driver.version=570,driver.manager.version=1,devicePlugin.config.name=1,devicePlugin.config.default=2",
    ]);
    assert_eq!(spec["daemonsets"]["rollingUpdate"]["maxUnavailable"], "2");
    assert_eq!(spec["driver"]["version"], "570");
    assert_eq!(spec["driver"]["manager"]["version"], "1");
    assert_eq!(
        spec["devicePlugin"]["config"],
        json!({"name": "1", "default": "2"})
    );
    // A values file's number (YAML) the same way.
    let dir = std::env::temp_dir().join(format!("gpu-operator-types-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("values.yaml");
    std::fs::write(
        &file,
        "toolkit:\n  version: 1.17\ndaemonsets:\n  rollingUpdate:\n    maxUnavailable: 3\n",
    )
    .unwrap();
    let spec = policy(&["-f", file.to_str().unwrap()]);
    assert_eq!(spec["toolkit"]["version"], "1.17");
    assert_eq!(spec["daemonsets"]["rollingUpdate"]["maxUnavailable"], "3");
}

#[test]
#[ignore = "runs helm: `cargo xtask cluster up` builds it, `cargo xtask ci` runs this"]
fn booleans_given_as_strings_become_booleans() {
    let spec = policy(&[
        "--set-string",
        "toolkit.enabled=false,cdi.enabled=false,driver.rdma.enabled=true,gds.enabled=false",
    ]);
    assert_eq!(spec["toolkit"]["enabled"], false);
    assert_eq!(spec["cdi"]["enabled"], false);
    assert_eq!(spec["driver"]["rdma"]["enabled"], true);
    assert_eq!(spec["gds"]["enabled"], false);
    // Chart switches too: "false" must not count as set (a non-empty string is true in templates).
    let off = render_docs(
        "gpu-operator",
        &[
            "--set-string",
            "operator.cleanupCRD=false,nfd.enabled=false",
        ],
    );
    assert!(!has(&off, "Job", "gpu-operator-cleanup-crd"));
    assert!(!has(&off, "DaemonSet", "gpu-operator-node-discovery"));
    let on = render_docs(
        "gpu-operator",
        &["--set-string", "operator.cleanupCRD=true,nfd.enabled=true"],
    );
    assert!(has(&on, "Job", "gpu-operator-cleanup-crd"));
    assert!(has(&on, "DaemonSet", "gpu-operator-node-discovery"));
}

#[test]
#[ignore = "runs helm: `cargo xtask cluster up` builds it, `cargo xtask ci` runs this"]
fn timeouts_and_counts_given_as_strings_become_integers() {
    let spec = policy(&[
        "--set-string",
        "driver.upgradePolicy.waitForCompletion.timeoutSeconds=600,driver.upgradePolicy.drain.timeoutSeconds=300,driver.upgradePolicy.gpuPodDeletion.timeoutSeconds=120,driver.upgradePolicy.maxParallelUpgrades=2",
    ]);
    let upgrade = &spec["driver"]["upgradePolicy"];
    assert_eq!(upgrade["waitForCompletion"]["timeoutSeconds"], 600);
    assert_eq!(upgrade["drain"]["timeoutSeconds"], 300);
    assert_eq!(upgrade["podDeletion"]["timeoutSeconds"], 120);
    assert_eq!(upgrade["maxParallelUpgrades"], 2);
}

#[test]
#[ignore = "runs helm: `cargo xtask cluster up` builds it, `cargo xtask ci` runs this"]
fn values_that_are_not_the_type_in_any_form_are_refused_with_the_key_named() {
    for (flag, set, named) in [
        ("--set-string", "toolkit.enabled=yes", "enabled"),
        (
            "--set-string",
            "driver.upgradePolicy.drain.timeoutSeconds=5m",
            "timeoutSeconds",
        ),
        ("--set", "driver.enabled=3", "enabled"),
    ] {
        let error = refused(&[flag, set]);
        assert!(error.contains(named), "{flag} {set}: {error}");
    }
}

#[test]
#[ignore = "runs helm: `cargo xtask cluster up` builds it, `cargo xtask ci` runs this"]
fn keys_no_nvidia_release_had_are_refused_with_the_key_named() {
    for (set, named) in [
        ("mig.config=all-balanced", "'config'"),
        ("mps.enabled=true", "'mps'"),
        ("devicePlugin.confg.name=x", "'confg'"),
    ] {
        let error = refused(&["--set", set]);
        assert!(error.contains(named), "--set {set}: {error}");
    }
}

#[test]
#[ignore = "runs helm: `cargo xtask cluster up` builds it, `cargo xtask ci` runs this"]
fn nvidias_validator_and_node_status_exporter_images_may_stay() {
    // (NVIDIA's operator image itself: tests::nvidia_values.)
    let spec = policy(&[
        "--set",
        "validator.repository=nvcr.io/nvidia,validator.image=gpu-operator,validator.version=v26.7.0,nodeStatusExporter.repository=nvcr.io/nvidia,nodeStatusExporter.image=gpu-operator,nodeStatusExporter.version=v26.7.0",
    ]);
    assert_eq!(spec["validator"]["repository"], "nvcr.io/nvidia");
    assert_eq!(spec["nodeStatusExporter"]["version"], "v26.7.0");
}
