//! The examples and the every-field fixture: they deserialize, serialize back unchanged, use
//! only fields of the schema, and pass the CEL rules.

use gpu_operator_api::ClusterPolicy;
use gpu_operator_api::spec::MigStrategy;
use serde_json::Value;

use super::{cel_errors, crd_schema, every_field, example_policies, unknown_fields};

fn round_trip(name: &str, original: &Value) {
    let policy: ClusterPolicy = serde_json::from_value(original.clone())
        .unwrap_or_else(|e| panic!("{name} does not deserialize: {e}"));
    let back = serde_json::to_value(&policy).unwrap();
    assert_eq!(&back, original, "{name} changes in a serde round trip");
}

#[test]
fn examples_round_trip_through_the_rust_types() {
    for (name, policy) in example_policies() {
        round_trip(&name, &policy);
    }
}

#[test]
fn every_field_fixture_round_trips_through_the_rust_types() {
    round_trip("every-field.yaml", &every_field());
}

#[test]
fn examples_and_fixture_use_only_schema_fields() {
    let schema = crd_schema();
    let mut all = example_policies();
    all.push(("every-field.yaml".into(), every_field()));
    for (name, policy) in all {
        let mut unknown = Vec::new();
        unknown_fields(&schema, &policy, "", &mut unknown);
        assert!(
            unknown.is_empty(),
            "{name} has fields the schema lacks: {unknown:?}"
        );
    }
}

#[test]
fn examples_and_fixture_pass_the_cel_rules() {
    let mut all = example_policies();
    all.push(("every-field.yaml".into(), every_field()));
    for (name, policy) in all {
        assert_eq!(cel_errors(&policy), Vec::new(), "{name} fails a CEL rule");
    }
}

/// Every leaf of the schema is set in the fixture, so the round-trip tests (unit and e2e)
/// cover every field.
#[test]
fn every_field_fixture_covers_every_schema_field() {
    fn missing(schema: &Value, value: &Value, path: &str, out: &mut Vec<String>) {
        if let Some(Value::Object(properties)) = schema.get("properties") {
            for (key, child_schema) in properties {
                let child_path = format!("{path}.{key}");
                match value.get(key) {
                    Some(child) => missing(child_schema, child, &child_path, out),
                    None => out.push(child_path),
                }
            }
        } else if let (Some(items), Some(first)) = (schema.get("items"), value.get(0)) {
            missing(items, first, &format!("{path}[0]"), out);
        }
    }
    let mut out = Vec::new();
    missing(
        &crd_schema()["properties"]["spec"],
        &every_field()["spec"],
        "spec",
        &mut out,
    );
    assert!(
        out.is_empty(),
        "the every-field fixture does not set: {out:?}"
    );
}

#[test]
fn examples_read_as_intended() {
    let find = |file: &str| -> ClusterPolicy {
        let (_, value) = example_policies()
            .into_iter()
            .find(|(name, _)| name == file)
            .unwrap();
        serde_json::from_value(value).unwrap()
    };
    let mig = find("mig-mixed.yaml");
    assert_eq!(mig.spec.mig.unwrap().strategy, Some(MigStrategy::Mixed));
    let preinstalled = find("driver-preinstalled.yaml");
    assert_eq!(preinstalled.spec.driver.enabled, Some(false));
    let slicing = find("time-slicing.yaml");
    let config = slicing.spec.device_plugin.config.unwrap();
    assert_eq!(config.name.as_deref(), Some("time-slicing-config"));
    let chart = find("chart-defaults.yaml");
    assert_eq!(chart.spec.driver.image.version(), Some("595.91.07"));
    assert_eq!(chart.spec.driver.image.repository(), Some("nvcr.io/nvidia"));
    assert!(find("minimal.yaml").spec.toolkit.image.is_unset());
}
