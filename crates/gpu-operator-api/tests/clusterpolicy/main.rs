//! Tests of the ClusterPolicy API: the generated schema, the CEL rules evaluated locally, and
//! serde round trips of the examples in `manifests/examples/` and of the every-field fixture.

// Test helpers outside `#[test]` functions: failing loudly is what they are for.
#![allow(clippy::unwrap_used, clippy::panic)]

mod cel;
mod examples;
mod nvidia_samples;
mod schema;

use std::path::{Path, PathBuf};

use gpu_operator_api::ClusterPolicy;
use kube::CustomResourceExt as _;
use serde_json::Value;

/// The workspace root.
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The CRD's `openAPIV3Schema` as JSON.
fn crd_schema() -> Value {
    let crd = serde_json::to_value(ClusterPolicy::crd()).unwrap();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
}

/// The schema of the object at `path` (`spec.devicePlugin.config`), following properties only.
fn schema_at(path: &str) -> Value {
    let mut schema = crd_schema();
    for key in path.split('.') {
        schema = schema["properties"][key].clone();
        assert!(!schema.is_null(), "no schema at {path}");
    }
    schema
}

/// Every ClusterPolicy document of `manifests/examples/*.yaml`, with its file name.
fn example_policies() -> Vec<(String, Value)> {
    let dir = repo_root().join("manifests/examples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    files.sort();
    let mut policies = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        for document in serde_yaml::Deserializer::from_str(&text) {
            let value: Value = serde::Deserialize::deserialize(document).unwrap();
            if value["kind"] == "ClusterPolicy" {
                policies.push((name.clone(), value));
            }
        }
    }
    assert!(
        policies.len() >= 5,
        "expected the five examples, found {}",
        policies.len()
    );
    policies
}

/// The fixture that sets every field.
fn every_field() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/every-field.yaml");
    serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A minimal valid ClusterPolicy as JSON, for tests to modify.
fn minimal() -> Value {
    serde_json::json!({
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": { "name": "test" },
        "spec": {
            "operator": {}, "daemonsets": {}, "driver": {}, "toolkit": {}, "devicePlugin": {},
            "dcgmExporter": {}, "dcgm": {}, "nodeStatusExporter": {}, "gfd": {}
        }
    })
}

/// Evaluates the schema's CEL rules on `object` like the API server (defaults applied first);
/// returns the failures as `(field path, message)`.
fn cel_errors(object: &Value) -> Vec<(String, String)> {
    match kube::core::cel::Validator::new().validate(&crd_schema(), object, None) {
        Ok(()) => Vec::new(),
        Err(errors) => errors
            .iter()
            .map(|e| (e.field_path.clone(), e.message.clone()))
            .collect(),
    }
}

/// Paths in `value` that the schema does not declare (what strict field validation reports).
fn unknown_fields(schema: &Value, value: &Value, path: &str, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            if let Some(Value::Object(properties)) = schema.get("properties") {
                for (key, child) in map {
                    match properties.get(key) {
                        Some(child_schema) => {
                            unknown_fields(child_schema, child, &format!("{path}.{key}"), out);
                        }
                        None if path.is_empty()
                            && ["apiVersion", "kind", "metadata"].contains(&key.as_str()) => {}
                        None => out.push(format!("{path}.{key}")),
                    }
                }
            } else if let Some(additional) = schema.get("additionalProperties") {
                for (key, child) in map {
                    unknown_fields(additional, child, &format!("{path}.{key}"), out);
                }
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                unknown_fields(&schema["items"], item, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}
