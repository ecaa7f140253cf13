//! NVIDIA's NVIDIADriver schema, as facts: every property path of NVIDIA's v26.7.0 CRD with its
//! type, enum, default, format, pattern, bounds, required fields and Kubernetes list and map markers
//! (`tests/fixtures/nvidia-nvidiadrivers-v26.7.0-schema.json`, no descriptions, no rules), and
//! the tests that ours has each of them. Beside it, the field values of NVIDIA's sample
//! NVIDIADriver (`config/samples/nvidia_v1alpha1_nvidiadriver.yaml`, comments left out) in
//! `tests/fixtures/nvidia-nvidiadriver-sample-v26.7.0.json`, which the round trips and the e2e
//! apply.
//!
//! Both files are written from NVIDIA's repository at v26.7.0 by the ignored test below:
//! `NVIDIA_GPU_OPERATOR=<checkout> cargo test -p gpu-operator-api --test nvidiadriver --
//! --ignored write_nvidia_facts`.

use std::{collections::BTreeMap, path::PathBuf};

use serde_json::{Map, Value};

use super::crd_schema;

/// The schema facts' path.
fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/nvidia-nvidiadrivers-v26.7.0-schema.json")
}

/// The sample's path.
fn sample_fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/nvidia-nvidiadriver-sample-v26.7.0.json")
}

/// NVIDIA's sample NVIDIADriver, as applied.
pub fn nvidia_sample() -> Value {
    serde_json::from_str(&std::fs::read_to_string(sample_fixture()).unwrap()).unwrap()
}

/// The keys of a schema node that are facts about its shape.
const FACT_KEYS: [&str; 17] = [
    "type",
    "enum",
    "default",
    "format",
    "required",
    "pattern",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "maxProperties",
    "x-kubernetes-int-or-string",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
];

/// Every node below `schema` (the root excluded), by path: `spec.env[].name`, `spec.labels{}`.
fn facts(schema: &Value) -> BTreeMap<String, Map<String, Value>> {
    fn walk(node: &Value, path: &str, out: &mut BTreeMap<String, Map<String, Value>>) {
        if !path.is_empty() {
            let mut facts = Map::new();
            for key in FACT_KEYS {
                if let Some(value) = node.get(key) {
                    let mut value = value.clone();
                    if key == "required"
                        && let Value::Array(names) = &mut value
                    {
                        names.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
                    }
                    // The YAML file says `minimum: 1`, the generator `1.0`: compare as numbers.
                    if let Some(number) = value
                        .as_f64()
                        .filter(|_| key == "minimum" || key == "maximum")
                    {
                        value = Value::from(number);
                    }
                    facts.insert(key.to_owned(), value);
                }
            }
            out.insert(path.to_owned(), facts);
        }
        let join = |key: &str| {
            if path.is_empty() {
                key.to_owned()
            } else {
                format!("{path}.{key}")
            }
        };
        if let Some(Value::Object(properties)) = node.get("properties") {
            for (key, child) in properties {
                walk(child, &join(key), out);
            }
        }
        if let Some(items @ Value::Object(_)) = node.get("items") {
            walk(items, &format!("{path}[]"), out);
        }
        if let Some(values @ Value::Object(_)) = node.get("additionalProperties") {
            walk(values, &format!("{path}{{}}"), out);
        }
    }
    let mut out = BTreeMap::new();
    walk(schema, "", &mut out);
    out
}

/// Schema facts by property path.
pub type Facts = BTreeMap<String, Map<String, Value>>;

/// NVIDIA's schema facts, by path.
pub fn nvidia_facts() -> Facts {
    let text = std::fs::read_to_string(fixture()).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
#[ignore = "writes the fixtures from NVIDIA's repository: set NVIDIA_GPU_OPERATOR to a v26.7.0 checkout"]
fn write_nvidia_facts() {
    // CI runs the ignored tests too (`--include-ignored`, for the helm ones): without a checkout
    // there is nothing to write.
    let Some(root) = std::env::var_os("NVIDIA_GPU_OPERATOR").map(PathBuf::from) else {
        eprintln!("NVIDIA_GPU_OPERATOR is not set: the fixtures stay as they are");
        return;
    };
    let read = |file: &str| -> Value {
        serde_yaml::from_str(&std::fs::read_to_string(root.join(file)).unwrap()).unwrap()
    };
    let sample = read("config/samples/nvidia_v1alpha1_nvidiadriver.yaml");
    std::fs::write(
        sample_fixture(),
        format!("{}\n", serde_json::to_string_pretty(&sample).unwrap()),
    )
    .unwrap();
    let crd = read("deployments/gpu-operator/crds/nvidia.com_nvidiadrivers.yaml");
    let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    let lines: Vec<String> = facts(schema)
        .iter()
        .map(|(path, facts)| {
            format!(
                "  {}: {}",
                Value::String(path.clone()),
                Value::Object(facts.clone())
            )
        })
        .collect();
    std::fs::write(fixture(), format!("{{\n{}\n}}\n", lines.join(",\n"))).unwrap();
}

#[test]
fn every_nvidia_field_is_ours_with_the_same_shape() {
    let ours = facts(&crd_schema());
    let nvidia = nvidia_facts();
    assert!(
        nvidia.len() > 200,
        "only {} paths in the fixture",
        nvidia.len()
    );
    let mut differences = Vec::new();
    for (path, theirs) in &nvidia {
        // The API server serves these of every custom resource itself; kube's generator leaves
        // them out (as for the ClusterPolicy).
        if ["apiVersion", "kind", "metadata"].contains(&path.as_str()) {
            continue;
        }
        let Some(mine) = ours.get(path) else {
            differences.push(format!("{path}: missing"));
            continue;
        };
        for (key, value) in theirs {
            // A list without a list type is atomic: the same merge as NVIDIA's explicit marker.
            let same_default = key == "x-kubernetes-list-type" && value == "atomic";
            if mine.get(key) != Some(value) && !(same_default && mine.get(key).is_none()) {
                differences.push(format!(
                    "{path}: {key} is {:?}, NVIDIA's {value}",
                    mine.get(key)
                ));
            }
        }
    }
    assert!(differences.is_empty(), "{differences:#?}");
}

#[test]
fn ours_adds_only_what_we_mean_to() {
    // Fields of ours beyond NVIDIA's, each on purpose: the GPU-user selector the upgrade policy
    // shares with the ClusterPolicy's (proposed to NVIDIA's upgrade library), and the generation
    // the status was computed from (issue 33's status per NVIDIADriver).
    let nvidia = nvidia_facts();
    let extra: Vec<String> = facts(&crd_schema())
        .into_keys()
        .filter(|path| !nvidia.contains_key(path))
        .collect();
    assert_eq!(
        extra,
        [
            "spec.upgradePolicy.podDeletion.podSelector",
            "status.observedGeneration"
        ]
    );
}

#[test]
fn ours_refuses_nothing_nvidias_schema_accepts() {
    // No bound, pattern, enum or required field beyond NVIDIA's: what NVIDIA's schema stores, ours
    // stores (our CEL rules are the only deliberate refusals, each tested in `cel`).
    let restricting = [
        "enum",
        "pattern",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "maxProperties",
        "required",
    ];
    let nvidia = nvidia_facts();
    let mut stricter = Vec::new();
    for (path, mine) in facts(&crd_schema()) {
        let theirs = nvidia.get(&path).cloned().unwrap_or_default();
        for key in restricting {
            if let Some(value) = mine.get(key)
                && theirs.get(key) != Some(value)
            {
                stricter.push(format!(
                    "{path}: {key} {value}, NVIDIA's {:?}",
                    theirs.get(key)
                ));
            }
        }
    }
    // The status is the operator's to write; its bounds are the ClusterPolicy's.
    assert_eq!(
        stricter,
        [
            "status.conditions: maxItems 64, NVIDIA's None",
            "status.observedGeneration: minimum 0.0, NVIDIA's None"
        ]
    );
}
