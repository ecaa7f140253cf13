//! NVIDIA's sample ClusterPolicies of four releases (`../shared/fixtures/nvidia/clusterpolicies`,
//! v23.9.2 … v26.7.0): every field is one of the schema's, every CEL rule passes, and the Rust
//! types keep every value (what the e2e's server-side dry run checks against the API server).

use std::path::PathBuf;

use gpu_operator_api::ClusterPolicy;
use serde_json::Value;

use super::{cel_errors, crd_schema, repo_root, unknown_fields};

fn samples() -> Vec<(String, Value)> {
    let dir = repo_root().join("../shared/fixtures/nvidia/clusterpolicies");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e} (the shared NVIDIA fixtures)", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let samples: Vec<(String, Value)> = files
        .iter()
        .map(|f| {
            let value: Value = serde_yaml::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
            (f.file_name().unwrap().to_string_lossy().into_owned(), value)
        })
        .collect();
    assert_eq!(samples.len(), 4, "four NVIDIA samples");
    samples
}

/// `value` without the nulls (the API server drops a null of a field that is not nullable).
fn without_nulls(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}

#[test]
fn nvidias_samples_use_only_schema_fields_and_pass_every_rule() {
    let schema = crd_schema();
    for (name, sample) in samples() {
        let sample = without_nulls(&sample);
        let mut unknown = Vec::new();
        unknown_fields(&schema, &sample, "", &mut unknown);
        assert!(unknown.is_empty(), "{name}: {unknown:?}");
        assert_eq!(cel_errors(&sample), Vec::new(), "{name}");
        let policy: ClusterPolicy = serde_json::from_value(sample.clone())
            .unwrap_or_else(|e| panic!("{name} does not deserialize: {e}"));
        let back = serde_json::to_value(&policy).unwrap();
        assert_eq!(back["spec"], sample["spec"], "{name} loses a value");
    }
}
