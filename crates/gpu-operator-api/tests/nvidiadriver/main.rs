//! Tests of the NVIDIADriver API: the generated schema against NVIDIA's (as a fixture of facts),
//! its CEL rules evaluated locally, and serde round trips of NVIDIA's sample and of a CR that
//! sets every field.

// Test helpers outside `#[test]` functions: failing loudly is what they are for.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cel;
mod facts;
mod round_trip;
mod schema;

use std::path::Path;

use gpu_operator_api::NvidiaDriver;
use kube::CustomResourceExt as _;
use serde_json::Value;

/// The CRD's `openAPIV3Schema` as JSON.
fn crd_schema() -> Value {
    let crd = serde_json::to_value(NvidiaDriver::crd()).unwrap();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
}

/// The fixture that sets every field.
fn every_field() -> Value {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nvidiadriver-every-field.yaml");
    serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// `object` with the defaults of NVIDIA's schema applied, as the API server stores it: a missing
/// property with a default is added wherever its parent object is present.
fn with_nvidia_defaults(object: &Value) -> Value {
    fn apply(value: &mut Value, path: &str, facts: &facts::Facts) {
        match value {
            Value::Object(map) => {
                let prefix = if path.is_empty() {
                    String::new()
                } else {
                    format!("{path}.")
                };
                for (child_path, child) in facts.range(prefix.clone()..) {
                    let Some(key) = child_path.strip_prefix(&prefix) else {
                        break;
                    };
                    if key.contains(['.', '[', '{']) {
                        continue;
                    }
                    if let Some(default) = child.get("default") {
                        map.entry(key.to_owned()).or_insert_with(|| default.clone());
                    }
                }
                for (key, child) in map.iter_mut() {
                    apply(child, &format!("{prefix}{key}"), facts);
                }
            }
            Value::Array(items) => {
                for item in items {
                    apply(item, &format!("{path}[]"), facts);
                }
            }
            _ => {}
        }
    }
    let mut object = object.clone();
    apply(&mut object, "", &facts::nvidia_facts());
    object
}

/// Evaluates the schema's CEL rules on `object` (on an update from `old`, with the transition
/// rules) like the API server; returns the failures as `(field path, message)`.
fn cel_errors(object: &Value, old: Option<&Value>) -> Vec<(String, String)> {
    match kube::core::cel::Validator::new().validate(&crd_schema(), object, old) {
        Ok(()) => Vec::new(),
        Err(errors) => errors
            .iter()
            .map(|e| (e.field_path.clone(), e.message.clone()))
            .collect(),
    }
}
