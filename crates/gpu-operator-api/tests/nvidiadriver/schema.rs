//! The generated CRD's identity (names, scope, version, printer columns) and the shape checks that
//! keep it acceptable to the API server.

use gpu_operator_api::NvidiaDriver;
use gpu_operator_api::nvidia_driver::cel;
use kube::CustomResourceExt as _;
use serde_json::{Value, json};

use super::crd_schema;

#[test]
fn crd_identity_matches_nvidia() {
    // NVIDIA's v26.7.0 CRD, by hand: names, scope, version and the three printer columns (Age
    // as a date, as our ClusterPolicy's, so kubectl prints an age rather than a timestamp), then
    // ours, only with `-o wide` (priority 1): the Ready condition's message.
    let crd = serde_json::to_value(NvidiaDriver::crd()).unwrap();
    assert_eq!(crd["metadata"]["name"], "nvidiadrivers.nvidia.com");
    assert_eq!(crd["spec"]["group"], "nvidia.com");
    assert_eq!(crd["spec"]["scope"], "Cluster");
    let names = &crd["spec"]["names"];
    assert_eq!(names["kind"], "NVIDIADriver");
    assert_eq!(names["plural"], "nvidiadrivers");
    assert_eq!(names["singular"], "nvidiadriver");
    assert_eq!(names["shortNames"], json!(["nvd", "nvdriver", "nvdrivers"]));
    let versions = crd["spec"]["versions"].as_array().unwrap();
    assert_eq!(versions.len(), 1);
    let version = &versions[0];
    assert_eq!(version["name"], "v1alpha1");
    assert_eq!(version["served"], true);
    assert_eq!(version["storage"], true);
    assert_eq!(version["subresources"], json!({ "status": {} }));
    assert_eq!(
        version["additionalPrinterColumns"],
        json!([
            { "name": "Status", "type": "string", "jsonPath": ".status.state" },
            { "name": "Default", "type": "boolean", "jsonPath": ".spec.default" },
            { "name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp" },
            {
                "name": "Message",
                "type": "string",
                "jsonPath": ".status.conditions[?(@.type==\"Ready\")].message",
                "description": "Ours (kubectl get -o wide): the Ready condition's ready/desired nodes and first problem nodes",
                "priority": 1,
            },
        ])
    );
}

/// Walks every schema node with its path.
fn walk(schema: &Value, path: &str, visit: &mut dyn FnMut(&str, &Value)) {
    visit(path, schema);
    if let Some(Value::Object(properties)) = schema.get("properties") {
        for (key, child) in properties {
            walk(child, &format!("{path}.{key}"), visit);
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(child @ Value::Object(_)) = schema.get(key) {
            walk(child, &format!("{path}[]"), visit);
        }
    }
}

#[test]
fn schema_is_structural_documented_and_free_of_nulls() {
    let mut problems = Vec::new();
    walk(&crd_schema(), "", &mut |path, schema| {
        let nullable_ok = [".status", ".spec.upgradePolicy.maxUnavailable"];
        if schema.get("nullable").is_some() && !nullable_ok.contains(&path) {
            problems.push(format!("nullable at {path}"));
        }
        for key in ["oneOf", "anyOf", "allOf", "$ref", "const", "title"] {
            if !path.is_empty() && schema.get(key).is_some() {
                problems.push(format!("{key} at {path}"));
            }
        }
        let int_or_string = schema.get("x-kubernetes-int-or-string").is_some();
        if !path.is_empty() && !int_or_string && schema.get("type").is_none() {
            problems.push(format!("no type at {path}"));
        }
        let is_property = !path.is_empty() && !path.ends_with("[]");
        if is_property && schema.get("description").is_none() {
            problems.push(format!("no description at {path}"));
        }
        if let Some(format) = schema.get("format").and_then(Value::as_str)
            && !["int32", "int64", "date-time"].contains(&format)
        {
            problems.push(format!("format {format} at {path}"));
        }
    });
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn every_rule_is_in_the_schema_and_compiles() {
    let schema = crd_schema();
    let text = schema.to_string();
    for rule in cel::all_rules() {
        let entry = rule.to_json().to_string();
        assert!(text.contains(&entry), "{rule:?} not used");
        assert!(
            rule.message.len() < 400,
            "message too long: {}",
            rule.message
        );
    }
    let compiled = kube::core::cel::compile_schema(&schema);
    let errors: Vec<String> = compiled
        .compilation_errors()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(errors.is_empty(), "CEL compile errors: {errors:?}");
}

#[test]
fn immutability_rules_sit_on_their_fields() {
    // NVIDIA's placement: a transition rule on each field itself.
    let spec = &crd_schema()["properties"]["spec"]["properties"];
    assert_eq!(
        spec["driverType"]["x-kubernetes-validations"],
        json!([cel::DRIVER_TYPE_IMMUTABLE.to_json()])
    );
    assert_eq!(
        spec["usePrecompiled"]["x-kubernetes-validations"],
        json!([cel::USE_PRECOMPILED_IMMUTABLE.to_json()])
    );
    assert_eq!(
        spec["driverType"]["enum"],
        json!(["gpu", "vgpu", "vgpu-host-manager"])
    );
}
