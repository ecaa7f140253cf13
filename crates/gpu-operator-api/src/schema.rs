//! Schema helpers: shapes schemars cannot express from the Rust types alone, and the pass that
//! keeps the generated CRD free of `nullable`, like NVIDIA's.

use schemars::{Schema, SchemaGenerator, json_schema};
use serde_json::{Map, Value};

/// Pattern of a Kubernetes quantity, as the API server's own types publish it.
const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// Schema of a resource map (`limits`, `requests`): resource name to quantity, integer or string.
/// (No `anyOf` of integer and string: kube's structural rewrite would empty its branches, and
/// `x-kubernetes-int-or-string` alone says the same.)
pub(crate) fn quantity_map(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "additionalProperties": {
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": true,
        },
    })
}

/// Schema of `ClusterPolicy.status.conditions`: `metav1.Condition` entries, one per `type` (a
/// list-map, so each reconciler can own its own entry through server-side apply).
pub(crate) fn conditions(_: &mut SchemaGenerator) -> Schema {
    condition_list(
        "What this condition reports, in CamelCase: Ready and Error (NVIDIA's pair), or one per operand such as DriverReady.",
        "The ClusterPolicy generation this condition was computed from.",
    )
}

/// Schema of `NVIDIADriver.status.conditions`, the same list-map with its own descriptions.
pub(crate) fn nvidia_driver_conditions(_: &mut SchemaGenerator) -> Schema {
    condition_list(
        "What this condition reports, in CamelCase: Ready and Error (NVIDIA's pair).",
        "The NVIDIADriver generation this condition was computed from.",
    )
}

/// Schema of `GPUCluster.status.conditions`, the same list-map with its own descriptions.
pub(crate) fn gpu_cluster_conditions(_: &mut SchemaGenerator) -> Schema {
    condition_list(
        "What this condition reports, in CamelCase: Ready and Error (NVIDIA's pair), and one per component such as DRADriverReady.",
        "The GPUCluster generation this condition was computed from.",
    )
}

/// A list-map of `metav1.Condition` keyed by `type`, with the descriptions of its `type` and
/// `observedGeneration`.
fn condition_list(type_description: &str, generation_description: &str) -> Schema {
    json_schema!({
        "type": "array",
        "maxItems": 64,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
        "items": {
            "type": "object",
            "required": ["lastTransitionTime", "message", "reason", "status", "type"],
            "properties": {
                "type": {
                    "description": type_description,
                    "type": "string",
                    "maxLength": 316,
                    "pattern": r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
                },
                "status": {
                    "description": "Whether the condition holds: True, False or Unknown.",
                    "type": "string",
                    "enum": ["True", "False", "Unknown"],
                },
                "reason": {
                    "description": "Why the condition has this status, as one CamelCase word (for example Reconciled, OperandNotReady).",
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 1024,
                    "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
                },
                "message": {
                    "description": "Human-readable details: what is wrong and what to do about it.",
                    "type": "string",
                    "maxLength": 32768,
                },
                "lastTransitionTime": {
                    "description": "When the status last changed (not when the condition was last written).",
                    "type": "string",
                    "format": "date-time",
                },
                "observedGeneration": {
                    "description": generation_description,
                    "type": "integer",
                    "format": "int64",
                    "minimum": 0,
                },
            },
        },
    })
}

/// Tidies this schema and all schemas below it; applied as a container transform on the spec
/// and status, which runs before kube's own transforms.
///
/// - Removes the "or null" that schemars adds for every `Option` field. kube's CRD generator
///   would otherwise turn each of them into `nullable: true`. NVIDIA's CRD has no nullable field:
///   the API server drops an explicit `null` and then applies the field's default, and we keep
///   that behaviour.
/// - Joins the lines of descriptions taken from wrapped doc comments, keeping paragraph breaks,
///   so `kubectl explain` can wrap them to the terminal.
/// - Replaces the integer formats schemars writes for Rust's unsigned and small types (`uint32`,
///   ...), which the API server does not know (it answers every apply of the CRD with `Warning:
///   unrecognized format "uint32"`, and `helm install` prints it), with `int32` or `int64`; the
///   field's `minimum` and `maximum` still bound it.
pub(crate) fn tidy(schema: &mut Schema) {
    if let Some(object) = schema.as_object_mut() {
        strip_null_object(object);
    }
}

fn unwrap_lines(text: &str) -> String {
    text.split("\n\n")
        .map(|paragraph| {
            paragraph
                .split('\n')
                .map(str::trim)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

fn is_null_schema(value: &Value) -> bool {
    match value.get("type") {
        Some(Value::String(t)) => t == "null",
        Some(Value::Array(types)) => types.iter().all(|t| t == "null"),
        _ => value.get("enum") == Some(&Value::Array(vec![Value::Null])),
    }
}

/// The Kubernetes integer format for a format schemars writes that the API server does not know.
fn kubernetes_integer_format(format: &str) -> Option<&'static str> {
    match format {
        "int8" | "int16" | "uint8" | "uint16" => Some("int32"),
        "uint32" | "uint64" | "uint" => Some("int64"),
        _ => None,
    }
}

fn strip_null_object(object: &mut Map<String, Value>) {
    if let Some(Value::String(format)) = object.get_mut("format")
        && let Some(known) = kubernetes_integer_format(format)
    {
        *format = known.to_owned();
    }
    if let Some(Value::String(description)) = object.get_mut("description") {
        *description = unwrap_lines(description);
    }
    if let Some(Value::Array(types)) = object.get_mut("type") {
        types.retain(|t| t != "null");
        if let [single] = types.as_slice() {
            let single = single.clone();
            object.insert("type".into(), single);
        }
    }
    if let Some(Value::Array(values)) = object.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    for key in ["anyOf", "oneOf"] {
        let Some(Value::Array(variants)) = object.get_mut(key) else {
            continue;
        };
        let before = variants.len();
        variants.retain(|v| !is_null_schema(v));
        if variants.len() < before && variants.len() == 1 {
            // `Option<T>` of a schema with subschemas: `{anyOf: [T, null]}` becomes T, keeping
            // this level's description (the field's) over T's own.
            if let Some(Value::Object(inner)) = variants.pop() {
                object.remove(key);
                for (k, v) in inner {
                    object.entry(k).or_insert(v);
                }
            }
        }
    }
    for (key, value) in object.iter_mut() {
        match (key.as_str(), value) {
            ("properties" | "patternProperties", Value::Object(children)) => {
                for child in children.values_mut() {
                    if let Value::Object(child) = child {
                        strip_null_object(child);
                    }
                }
            }
            ("items" | "additionalProperties", Value::Object(child)) => strip_null_object(child),
            ("anyOf" | "oneOf" | "allOf", Value::Array(children)) => {
                for child in children {
                    if let Value::Object(child) = child {
                        strip_null_object(child);
                    }
                }
            }
            _ => {}
        }
    }
}

/// Appends CEL rules (`x-kubernetes-validations`) to an object schema.
pub(crate) fn add_rules(schema: &mut Schema, rules: &[crate::cel::CelRule]) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    let entry = object
        .entry("x-kubernetes-validations")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(list) = entry {
        list.extend(rules.iter().map(crate::cel::CelRule::to_json));
    }
}
