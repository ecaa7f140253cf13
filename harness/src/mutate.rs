//! Random edits of JSON documents, for fuzzing what users write (ClusterPolicy specs,
//! configuration files): a [`Mutation`] replaces a node with a value chosen to break parsers,
//! removes one, or adds a key; [`mutate`] applies them at positions picked among all nodes. Used by
//! the pure fuzz tests (`crates/gpu-operator/tests/fuzzed_inputs.rs`) and, against the real API
//! server, by `e2e/tests/fuzzed_policies.rs`.

use std::path::Path;

use anyhow::Context as _;
use proptest::prelude::*;
use serde_json::{Map, Value};

/// The specs of NVIDIA's sample ClusterPolicies (`../shared/fixtures/nvidia/clusterpolicies` beside
/// the repository at `repo_root`), in file-name order: valid NVIDIA input to start mutations from.
pub fn nvidia_sample_specs(repo_root: &Path) -> anyhow::Result<Vec<Value>> {
    let dir = repo_root.join("../shared/fixtures/nvidia/clusterpolicies");
    let mut files = std::fs::read_dir(&dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<Vec<_>, _>>()?;
    files.sort();
    files
        .iter()
        .map(|file| {
            let text = std::fs::read_to_string(file)?;
            let policy: Value = serde_yaml::from_str(&text)
                .with_context(|| format!("parsing {}", file.display()))?;
            Ok(policy["spec"].clone())
        })
        .collect()
}

/// One edit of a JSON document, at the node `at` picks among all of them.
#[derive(Clone, Debug)]
pub enum Mutation {
    /// Replace the node with `with`.
    Replace {
        /// Which node (modulo their count).
        at: usize,
        /// The new value.
        with: Value,
    },
    /// Remove the node from its object or list.
    Remove {
        /// Which node (modulo their count).
        at: usize,
    },
    /// Add `key` to the node, if it is an object.
    Insert {
        /// Which node (modulo their count).
        at: usize,
        /// The key.
        key: String,
        /// Its value.
        with: Value,
    },
}

/// Values that tend to break parsers: wrong types, edge numbers, odd strings.
pub fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        prop_oneof![Just(0.5), Just(-1.0), Just(1e308), Just(-0.0)].prop_map(Value::from),
        "[a-zA-Z0-9%:@/._-]{0,24}".prop_map(Value::String),
        prop_oneof![
            Just(""),
            Just("0"),
            Just("-1"),
            Just("101%"),
            Just("true"),
            Just("nvcr.io/nvidia/driver@sha256:"),
            Just("a:b:c"),
            Just("\u{0}"),
            Just("ä̈\u{202e}"),
        ]
        .prop_map(|s| Value::String(s.to_owned())),
        Just(Value::String("x".repeat(70_000))),
    ]
}

/// Small JSON trees of [`leaf`] values.
pub fn json_value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-zA-Z]{1,12}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// One random [`Mutation`].
pub fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), json_value()).prop_map(|(at, with)| Mutation::Replace { at, with }),
        any::<usize>().prop_map(|at| Mutation::Remove { at }),
        (any::<usize>(), "[a-zA-Z]{1,16}", json_value())
            .prop_map(|(at, key, with)| Mutation::Insert { at, key, with }),
    ]
}

/// JSON pointers of every node under `value` (the root excluded).
fn pointers(value: &Value, here: &str, out: &mut Vec<String>) {
    let children: Vec<(String, &Value)> = match value {
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| (k.replace('~', "~0").replace('/', "~1"), v))
            .collect(),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, v)| (i.to_string(), v))
            .collect(),
        _ => Vec::new(),
    };
    for (key, child) in children {
        let path = format!("{here}/{key}");
        out.push(path.clone());
        pointers(child, &path, out);
    }
}

/// `doc` with `mutations` applied in order.
pub fn mutate(mut doc: Value, mutations: &[Mutation]) -> Value {
    for mutation in mutations {
        let mut all = Vec::new();
        pointers(&doc, "", &mut all);
        if all.is_empty() {
            continue;
        }
        let pick = |at: usize| all[at % all.len()].clone();
        match mutation {
            Mutation::Replace { at, with } => {
                if let Some(target) = doc.pointer_mut(&pick(*at)) {
                    *target = with.clone();
                }
            }
            Mutation::Remove { at } => {
                let path = pick(*at);
                let Some((parent, key)) = path.rsplit_once('/') else {
                    continue;
                };
                match doc.pointer_mut(parent) {
                    Some(Value::Object(map)) => {
                        map.remove(&key.replace("~1", "/").replace("~0", "~"));
                    }
                    Some(Value::Array(items)) => {
                        if let Ok(index) = key.parse::<usize>()
                            && index < items.len()
                        {
                            items.remove(index);
                        }
                    }
                    _ => {}
                }
            }
            Mutation::Insert { at, key, with } => {
                if let Some(Value::Object(map)) = doc.pointer_mut(&pick(*at)) {
                    map.insert(key.clone(), with.clone());
                }
            }
        }
    }
    doc
}
