//! The optional example NodeHealthCheck (`healthCheck.nodeHealthCheck`): absent by default; when
//! enabled, NHC's v1alpha1 shape over the GPU nodes, remediating `GPUHealthy=False` (never
//! `Unknown`) after five minutes, with Self Node Remediation's default template; typos refused.
//! That the real engine acts on it is the e2e test `node_health_check`. Needs the harness's helm.

use serde_json::{Value, json};

use super::{render, render_error};

fn checks(docs: &[Value]) -> Vec<&Value> {
    docs.iter()
        .filter(|d| d["kind"] == "NodeHealthCheck")
        .collect()
}

#[test]
#[ignore = "runs helm: `cargo xtask cluster up` builds it, `cargo xtask ci` runs this"]
fn the_example_node_health_check_is_off_by_default_and_nhcs_shape_when_on() {
    assert!(checks(&render(&[])).is_empty(), "off by default");

    let docs = render(&["--set", "healthCheck.nodeHealthCheck.enabled=true"]);
    let found = checks(&docs);
    assert_eq!(found.len(), 1);
    let nhc = found[0];
    assert_eq!(nhc["apiVersion"], "remediation.medik8s.io/v1alpha1");
    assert_eq!(nhc["metadata"]["name"], "nvidia-gpu-health");
    assert!(nhc["metadata"]["namespace"].is_null(), "cluster-scoped");
    // Hand-written from NHC's API (docs/configuration.md of the module) and our conditions.
    assert_eq!(
        nhc["spec"],
        json!({
            "selector": {"matchLabels": {"nvidia.com/gpu.present": "true"}},
            "minHealthy": "51%",
            "unhealthyConditions": [{"type": "GPUHealthy", "status": "False", "duration": "300s"}],
            "remediationTemplate": {
                "apiVersion": "self-node-remediation.medik8s.io/v1alpha1",
                "kind": "SelfNodeRemediationTemplate",
                "name": "self-node-remediation-automatic-strategy-template",
                "namespace": "operators",
            },
        })
    );

    // An empty template namespace is the release's; a string "true" switches it on too.
    let docs = render(&[
        "--set-string",
        "healthCheck.nodeHealthCheck.enabled=true",
        "--set",
        "healthCheck.nodeHealthCheck.remediationTemplate.namespace=",
    ]);
    assert_eq!(
        checks(&docs)[0]["spec"]["remediationTemplate"]["namespace"],
        "gpu-operator"
    );
}

#[test]
#[ignore = "runs helm: `cargo xtask cluster up` builds it, `cargo xtask ci` runs this"]
fn node_health_check_typos_are_refused_with_the_key_named() {
    let error = render_error(&["--set", "healthCheck.nodeHealthCheck.minHealty=50%"]);
    assert!(error.contains("minHealty"), "{error}");
    let error = render_error(&[
        "--set-json",
        r#"healthCheck.nodeHealthCheck.unhealthyConditions=[{"type":"GPUHealthy","status":"false","duration":"1m"}]"#,
    ]);
    assert!(error.contains("status"), "{error}");
}
