//! NVIDIA's sample and the every-field fixture: they use only fields of the schema, pass its
//! rules, and read back through the Rust types unchanged, as the API server stores them (NVIDIA's
//! defaults applied).

use gpu_operator_api::NvidiaDriver;
use gpu_operator_api::nvidia_driver::DriverType;
use serde_json::{Value, json};

use super::facts::{nvidia_facts, nvidia_sample};
use super::{cel_errors, every_field, with_nvidia_defaults};

fn round_trip(name: &str, stored: &Value) {
    let driver: NvidiaDriver = serde_json::from_value(stored.clone())
        .unwrap_or_else(|e| panic!("{name} does not deserialize: {e}"));
    let back = serde_json::to_value(&driver).unwrap();
    assert_eq!(&back, stored, "{name} changes in a serde round trip");
}

#[test]
fn nvidias_sample_round_trips_as_stored() {
    let stored = with_nvidia_defaults(&nvidia_sample());
    // The two defaults NVIDIA's CRD adds to its own sample (a hand check of the helper).
    assert_eq!(stored["spec"]["default"], json!(false));
    assert_eq!(stored["spec"]["kernelModuleType"], json!("auto"));
    round_trip("NVIDIA's sample", &stored);
}

#[test]
fn every_field_fixture_round_trips() {
    let fixture = every_field();
    assert_eq!(
        with_nvidia_defaults(&fixture),
        fixture,
        "the fixture leaves a defaulted field unset"
    );
    round_trip("nvidiadriver-every-field.yaml", &fixture);
}

#[test]
fn sample_and_fixture_pass_every_rule() {
    for (name, object) in [
        ("NVIDIA's sample", with_nvidia_defaults(&nvidia_sample())),
        ("the every-field fixture", every_field()),
    ] {
        assert_eq!(cel_errors(&object, None), Vec::new(), "{name}");
        assert_eq!(
            cel_errors(&object, Some(&object)),
            Vec::new(),
            "{name} unchanged"
        );
    }
}

/// Every property of NVIDIA's schema is set in the fixture (lists with one item, maps with one
/// key), so the round trips here and in the e2e cover every field.
#[test]
fn every_field_fixture_sets_every_nvidia_field() {
    fn paths(value: &Value, path: &str, map_keys: &[&str], out: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                for (key, child) in map {
                    let child_path = if map_keys.contains(&path) {
                        format!("{path}{{}}")
                    } else if path.is_empty() {
                        key.clone()
                    } else {
                        format!("{path}.{key}")
                    };
                    out.push(child_path.clone());
                    paths(child, &child_path, map_keys, out);
                }
            }
            Value::Array(items) => {
                for item in items {
                    out.push(format!("{path}[]"));
                    paths(item, &format!("{path}[]"), map_keys, out);
                }
            }
            _ => {}
        }
    }
    let facts = nvidia_facts();
    // The maps of NVIDIA's schema: their keys are the user's, not properties.
    let map_keys: Vec<&str> = facts
        .keys()
        .filter_map(|path| path.strip_suffix("{}"))
        .collect();
    let mut set = Vec::new();
    paths(&every_field(), "", &map_keys, &mut set);
    let unset: Vec<&String> = facts
        .keys()
        .filter(|path| path.starts_with("spec") && !set.contains(path))
        .collect();
    assert!(unset.is_empty(), "the fixture does not set {unset:#?}");
    let unknown: Vec<&String> = set
        .iter()
        .filter(|p| p.starts_with("spec") && !facts.contains_key(*p))
        .collect();
    assert!(unknown.is_empty(), "not in NVIDIA's schema: {unknown:#?}");
}

#[test]
fn the_fixture_reads_as_written() {
    let driver: NvidiaDriver = serde_json::from_value(every_field()).unwrap();
    assert_eq!(driver.spec.driver_type, DriverType::Gpu);
    assert_eq!(driver.spec.image.version(), Some("595.91.07"));
    assert_eq!(
        driver
            .spec
            .licensing_config
            .as_ref()
            .unwrap()
            .name
            .as_deref(),
        Some("example-licensing-configmap")
    );
    assert_eq!(
        driver
            .spec
            .virtual_topology_config
            .as_ref()
            .unwrap()
            .name
            .as_deref(),
        Some("example-virtual-topology")
    );
    assert_eq!(driver.spec.gds.as_ref().and_then(|g| g.enabled), Some(true));
    assert_eq!(
        driver.spec.gdrcopy.as_ref().and_then(|g| g.enabled),
        Some(true)
    );
    assert!(driver.spec.use_precompiled != Some(true) && !driver.spec.default);
}
