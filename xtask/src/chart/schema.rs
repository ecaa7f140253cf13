//! The chart's `values.schema.json`, generated: every values section that becomes a ClusterPolicy
//! section takes its schema from the CRD (so the two cannot drift apart), plus the chart-only keys.
//! Every object refuses unknown keys, so a typo fails `helm install` with the key named.
//!
//! Types are as loose as NVIDIA's templates are: a boolean may be given as the string `"true"` or
//! `"false"` (`--set-string`, old addon scripts), an integer as a string of digits, and the values
//! NVIDIA's templates quote (every `version`, `daemonsets.rollingUpdate.maxUnavailable`, …) as a
//! number (`--set driver.version=570`). The chart turns each back into the CRD's type before
//! rendering (`gpu-operator.normalise`, driven by the generated `_value_types.tpl`).

use anyhow::Context as _;
use gpu_operator_api::{ClusterPolicy, GpuCluster};
use kube::CustomResourceExt as _;
use serde_json::{Map, Value, json};

/// Values sections rendered into the ClusterPolicy section of the same name with the same shape.
const SPEC_SECTIONS: [&str; 22] = [
    "psa",
    "psp",
    "cdi",
    "sandboxWorkloads",
    "hostPaths",
    "daemonsets",
    "validator",
    "mig",
    "toolkit",
    "dcgm",
    "gfd",
    "nodeStatusExporter",
    "gds",
    "gdrcopy",
    "vgpuManager",
    "vgpuDeviceManager",
    "vfioManager",
    "kataManager",
    "sandboxDevicePlugin",
    "kataSandboxDevicePlugin",
    "ccManager",
    "migManager",
];

/// Values NVIDIA's chart templates render with `| quote`, besides every `version`: a number given
/// for them becomes a string, as it does in NVIDIA's chart (its `clusterpolicy.yaml`).
const QUOTED: [&str; 6] = [
    "daemonsets.rollingUpdate.maxUnavailable",
    "devicePlugin.config.name",
    "devicePlugin.config.default",
    "migManager.config.default",
    "ccManager.defaultMode",
    "sandboxWorkloads.mode",
];

/// The values paths whose type the chart normalises, by the type they end up as.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ValueTypes {
    /// Booleans, also accepted as `"true"`/`"false"`.
    pub booleans: Vec<String>,
    /// Integers, also accepted as strings of digits.
    pub integers: Vec<String>,
    /// Strings, also accepted as numbers.
    pub strings: Vec<String>,
}

/// The schema as pretty JSON with a trailing newline.
pub fn values_schema_json() -> anyhow::Result<String> {
    let schema = values_schema()?;
    Ok(format!("{}\n", serde_json::to_string_pretty(&schema)?))
}

/// The schema of the chart's values, with NVIDIA's loose types.
pub fn values_schema() -> anyhow::Result<Value> {
    let mut schema = strict_values_schema()?;
    widen(&mut schema, "", &mut ValueTypes::default());
    Ok(schema)
}

/// Where the chart normalises types (see [`ValueTypes`]).
pub fn value_types() -> anyhow::Result<ValueTypes> {
    let mut types = ValueTypes::default();
    widen(&mut strict_values_schema()?, "", &mut types);
    Ok(types)
}

/// `templates/_value_types.tpl`: the paths of [`value_types`] as a named template.
pub fn value_types_template(header: &str) -> anyhow::Result<String> {
    let types = value_types()?;
    let mut lines: Vec<String> = header
        .lines()
        .map(|line| format!("{{{{/* {} */}}}}", line.trim_start_matches("# ")))
        .collect();
    lines.push(
        "{{/* The values paths whose type gpu-operator.normalise restores (values.schema.json accepts\n\
         NVIDIA's loose forms of them). */}}\n{{- define \"gpu-operator.valueTypes\" -}}"
            .to_owned(),
    );
    for (kind, paths) in [
        ("booleans", &types.booleans),
        ("integers", &types.integers),
        ("strings", &types.strings),
    ] {
        lines.push(format!("{kind}:"));
        lines.extend(paths.iter().map(|path| format!("  - {path}")));
    }
    lines.push("{{- end -}}\n".to_owned());
    Ok(lines.join("\n"))
}

/// Loosens the types of the object properties under `schema` (objects only: list items and map
/// values keep their types) and records their paths.
fn widen(schema: &mut Value, path: &str, types: &mut ValueTypes) {
    let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) else {
        return;
    };
    for (name, property) in properties.iter_mut() {
        let here = if path.is_empty() {
            name.clone()
        } else {
            format!("{path}.{name}")
        };
        match property.get("type").and_then(Value::as_str) {
            Some("boolean") => {
                let description = property.get("description").cloned();
                *property = json!({"anyOf": [
                    {"type": "boolean"},
                    {"type": "string", "enum": ["true", "false"]},
                ]});
                if let Some(d) = description {
                    property["description"] = d;
                }
                types.booleans.push(here);
            }
            Some("integer") => {
                let mut integer = property.clone();
                let description = integer
                    .as_object_mut()
                    .and_then(|o| o.remove("description"));
                *property = json!({"anyOf": [
                    integer,
                    {"type": "string", "pattern": "^[0-9]+$"},
                ]});
                if let Some(d) = description {
                    property["description"] = d;
                }
                types.integers.push(here);
            }
            Some("string") if name == "version" || QUOTED.contains(&here.as_str()) => {
                property["type"] = json!(["string", "number"]);
                types.strings.push(here);
            }
            _ => widen(property, &here, types),
        }
    }
}

/// The schema of the chart's values with the CRD's exact types.
fn strict_values_schema() -> anyhow::Result<Value> {
    let spec = spec_properties()?;
    let section = |name: &str| -> anyhow::Result<Value> {
        let schema = spec
            .get(name)
            .with_context(|| format!("the CRD has no spec.{name}"))?;
        Ok(convert(schema))
    };
    let mut properties = Map::new();
    for name in SPEC_SECTIONS {
        properties.insert(name.to_owned(), section(name)?);
    }
    let mut driver = section("driver")?;
    let upgrade = &mut driver["properties"]["upgradePolicy"]["properties"];
    if let Some(deletion) = upgrade
        .as_object_mut()
        .and_then(|p| p.remove("podDeletion"))
    {
        upgrade["gpuPodDeletion"] = deletion;
    }
    driver["properties"]["nvidiaDriverCRD"] = nvidia_driver_crd();
    properties.insert("driver".into(), driver);

    let mut plugin = section("devicePlugin")?;
    add_create_and_data(&mut plugin["properties"]["config"], config_map_data());
    properties.insert("devicePlugin".into(), plugin);
    let mut exporter = section("dcgmExporter")?;
    add_create_and_data(
        &mut exporter["properties"]["config"],
        json!({"type": "string", "description": "The metrics as DCGM exporter CSV (key dcgm-metrics.csv)."}),
    );
    properties.insert("dcgmExporter".into(), exporter);
    add_create_and_data(
        &mut properties["migManager"]["properties"]["config"],
        config_map_data(),
    );
    properties.insert("operator".into(), operator(&spec)?);
    properties.insert("draDriver".into(), dra_driver()?);
    for (name, schema) in chart_only() {
        properties.insert(name.to_owned(), schema);
    }
    Ok(json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Values of the gpu-operator chart",
        "type": "object",
        "additionalProperties": false,
        "properties": properties,
    }))
}

/// `spec.properties` of the ClusterPolicy CRD's served version.
fn spec_properties() -> anyhow::Result<Map<String, Value>> {
    let crd = serde_json::to_value(ClusterPolicy::crd())?;
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        .as_object()
        .cloned()
        .context("the ClusterPolicy CRD has no spec properties")
}

/// The `draDriver` values: the GPUCluster CRD's `spec.draDriver`, which `gpuCluster.deployCR`
/// renders them into.
fn dra_driver() -> anyhow::Result<Value> {
    let crd = serde_json::to_value(GpuCluster::crd())?;
    let section = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        ["draDriver"];
    anyhow::ensure!(
        section.is_object(),
        "the GPUCluster CRD has no spec.draDriver"
    );
    let mut section = section.clone();
    drop_nullable(&mut section);
    let mut schema = convert(&section);
    schema["description"] = json!(
        "The NVIDIA DRA driver for GPUs, rendered into the GPUCluster's spec.draDriver with gpuCluster.deployCR."
    );
    Ok(schema)
}

/// Removes `nullable` everywhere under `schema`: the GPUCluster's optional fields are nullable in
/// its CRD, and the values take them as the ClusterPolicy's, set or left out.
fn drop_nullable(schema: &mut Value) {
    match schema {
        Value::Object(object) => {
            object.remove("nullable");
            object.values_mut().for_each(drop_nullable);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_nullable),
        _ => {}
    }
}

/// An OpenAPI (structural CRD) schema as JSON Schema: objects with properties refuse unknown
/// keys, int-or-string becomes `anyOf`, nullable adds `null`, Kubernetes extensions go.
fn convert(schema: &Value) -> Value {
    let Some(object) = schema.as_object() else {
        return schema.clone();
    };
    let mut out = Map::new();
    for (key, value) in object {
        match key.as_str() {
            "properties" => {
                let converted = value
                    .as_object()
                    .map(|p| p.iter().map(|(k, v)| (k.clone(), convert(v))).collect())
                    .unwrap_or_default();
                out.insert(key.clone(), Value::Object(converted));
            }
            "items" | "additionalProperties" if value.is_object() => {
                out.insert(key.clone(), convert(value));
            }
            "nullable" | "format" => {}
            k if k.starts_with("x-kubernetes-") => {}
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    if object.contains_key("properties") && !object.contains_key("additionalProperties") {
        out.insert("additionalProperties".into(), Value::Bool(false));
    }
    if object.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
        out.remove("type");
        out.insert(
            "anyOf".into(),
            json!([{"type": "integer"}, {"type": "string"}]),
        );
    }
    if object.get("nullable") == Some(&Value::Bool(true))
        && let Some(Value::String(kind)) = out.get("type").cloned()
    {
        out.insert("type".into(), json!([kind, "null"]));
    }
    Value::Object(out)
}

/// `create` and `data`, the chart-only keys of a `config` section that may create its ConfigMap.
fn add_create_and_data(config: &mut Value, data: Value) {
    config["properties"]["create"] = json!({
        "type": "boolean",
        "description": "Create the ConfigMap `name` from `data` in the release namespace.",
    });
    config["properties"]["data"] = data;
}

/// ConfigMap data: config name → config text.
fn config_map_data() -> Value {
    json!({
        "type": "object",
        "description": "The ConfigMap's data when `create` is true: key → configuration text.",
        "additionalProperties": {"type": "string"},
    })
}

fn nvidia_driver_crd() -> Value {
    json!({
        "type": "object",
        "description": "NVIDIA's NVIDIADriver CRD mode: `enabled` hands the driver to NVIDIADrivers (the ClusterPolicy's driver.useNvidiaDriverCRD); `deployDefaultCR` creates the NVIDIADriver `default` from the driver values, with `driverType` and `nodeSelector`.",
        "additionalProperties": false,
        "properties": {
            "enabled": {"type": "boolean"},
            "deployDefaultCR": {"type": "boolean"},
            "driverType": {"type": "string", "enum": ["gpu", "vgpu", "vgpu-host-manager"]},
            "nodeSelector": {"type": "object", "additionalProperties": {"type": "string"}},
        },
    })
}

/// The `operator` values: the operator Deployment plus the ClusterPolicy's operator keys.
fn operator(spec: &Map<String, Value>) -> anyhow::Result<Value> {
    let from_spec = |path: &[&str]| -> anyhow::Result<Value> {
        let mut schema = &Value::Object(spec.clone());
        for key in path {
            schema = schema
                .get("properties")
                .unwrap_or(schema)
                .get(*key)
                .with_context(|| format!("the CRD has no spec.{}", path.join(".")))?;
        }
        Ok(convert(schema))
    };
    let string = |description: &str| json!({"type": "string", "description": description});
    let boolean = |description: &str| json!({"type": "boolean", "description": description});
    let string_map = |description: &str| json!({"type": "object", "additionalProperties": {"type": "string"}, "description": description});
    Ok(json!({
        "type": "object",
        "description": "The operator's Deployment, and the operator section of the ClusterPolicy.",
        "additionalProperties": false,
        "properties": {
            "repository": string("Registry and path of the operator image."),
            "image": string("Operator image name."),
            "version": string("Operator image tag or sha256 digest; defaults to the chart's appVersion."),
            "imagePullPolicy": {"type": "string", "enum": ["Always", "IfNotPresent", "Never"]},
            "imagePullSecrets": {"type": "array", "items": {"type": "string"}, "description": "Secret names for pulling the operator image."},
            "env": {
                "type": "array",
                "description": "Extra environment variables of the operator container (EnvVar objects).",
                "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}},
            },
            "priorityClassName": string("PriorityClass of the operator pod."),
            "runtimeClass": from_spec(&["operator", "runtimeClass"])?,
            "nodeSelector": string_map("Node selector of the operator pod."),
            "use_ocp_driver_toolkit": from_spec(&["operator", "use_ocp_driver_toolkit"])?,
            "cleanupCRD": boolean("Delete the ClusterPolicy CRD, and so every ClusterPolicy, on uninstall (pre-delete hook)."),
            "upgradeCRD": boolean("Apply the chart's CRDs on install and upgrade (hook Job running `gpu-operator crds apply`)."),
            "cleanupNodeLabels": boolean("Remove what the operator and its agents wrote on nodes (labels, annotations, the driver upgrade's cordon, the validator's conditions) on uninstall (post-delete hook); on by default."),
            "tolerations": from_spec(&["daemonsets", "tolerations"])?,
            "annotations": string_map("Annotations of the operator pod."),
            "affinity": {"type": "object", "description": "Affinity of the operator pod."},
            "logging": {
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "timeEncoding": {"type": "string", "enum": ["epoch", "millis", "nano", "iso8601", "rfc3339", "rfc3339nano"], "description": "Accepted for compatibility; timestamps are always RFC 3339."},
                    "level": {"type": "string", "enum": ["trace", "debug", "info", "warn", "error"], "description": "Log level."},
                    "develMode": boolean("Text logs instead of JSON lines."),
                },
            },
            "resources": from_spec(&["driver", "resources"])?,
            "metrics": from_spec(&["operator", "metrics"])?,
            "defaultRuntime": from_spec(&["operator", "defaultRuntime"])?,
            "defaultGPUMode": from_spec(&["operator", "defaultGPUMode"])?,
            "initContainer": from_spec(&["operator", "initContainer"])?,
        },
    }))
}

/// Keys that only steer the chart.
fn chart_only() -> Vec<(&'static str, Value)> {
    let switch = |key: &str, description: &str| {
        json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {key: {"type": "boolean", "description": description}},
        })
    };
    vec![
        (
            "platform",
            switch(
                "openshift",
                "OpenShift; not supported yet (`true` fails the install).",
            ),
        ),
        (
            "nfd",
            json!({
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "enabled": {"type": "boolean", "description": "GPU node discovery: `true` (NVIDIA's default) deploys this chart's discovery agent (DaemonSet `gpu-node-discovery`) instead of node-feature-discovery. It writes the NFD labels the operator reads and nothing where NFD is installed."},
                    "nodefeaturerules": {"type": "boolean", "description": "NFD NodeFeatureRules; accepted for compatibility, unused (the agent needs none)."},
                },
            }),
        ),
        (
            "nodeAgentPolicy",
            switch(
                "enabled",
                "Confine the node agents (validator, discovery agent) to their own node and the keys they own (a ValidatingAdmissionPolicy; Kubernetes 1.30+).",
            ),
        ),
        ("healthCheck", health_check()),
        (
            "clusterPolicy",
            switch(
                "deployCR",
                "Render the ClusterPolicy `cluster-policy` from these values.",
            ),
        ),
        (
            "gpuCluster",
            switch(
                "deployCR",
                "Render the GPUCluster `gpu-cluster` (the DRA-based GPU stack) from the draDriver, dcgm, dcgmExporter, hostPaths and daemonsets values. With clusterPolicy.deployCR too, both are reconciled.",
            ),
        ),
        (
            "node-feature-discovery",
            json!({"type": "object", "description": "Accepted so NVIDIA's values files load; unused."}),
        ),
        (
            "nameOverride",
            json!({"type": "string", "description": "Replaces the chart name in `app.kubernetes.io/name` and in the release's base name (NVIDIA's helper)."}),
        ),
        (
            "fullnameOverride",
            json!({"type": "string", "description": "The release's base name of the objects named after the release (RBAC, hook Jobs); the Deployment and Service stay `gpu-operator`."}),
        ),
        (
            "global",
            json!({"type": "object", "description": "Values Helm passes to every chart of an umbrella chart (`global:`); accepted so this chart works as a subchart, unused."}),
        ),
        (
            "enabled",
            json!({"type": "boolean", "description": "The key an umbrella chart's `condition: gpu-operator.enabled` reads; Helm passes it to this chart as a value. Unused here (the umbrella chart decides whether this chart is installed)."}),
        ),
        (
            "extraObjects",
            json!({
                "type": "array",
                "description": "Extra manifests installed with the release (objects or templated strings).",
                "items": {"type": ["object", "string"]},
            }),
        ),
    ]
}

/// `healthCheck`: the optional example NodeHealthCheck (templates/node-health-check.yaml).
fn health_check() -> Value {
    let object = |description: &str| json!({"type": "object", "description": description});
    json!({
        "type": "object",
        "additionalProperties": false,
        "properties": {"nodeHealthCheck": {
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "enabled": {"type": "boolean", "description": "Render an example medik8s NodeHealthCheck (remediation.medik8s.io/v1alpha1) over the GPU nodes; Node Health Check must be installed."},
                "name": {"type": "string", "description": "The NodeHealthCheck's name."},
                "selector": object("Label selector of the nodes it watches (default: `nvidia.com/gpu.present: \"true\"`)."),
                "minHealthy": {"type": ["string", "integer"], "description": "No remediation starts while fewer selected nodes are healthy (a number or a percentage)."},
                "unhealthyConditions": {
                    "type": "array",
                    "description": "Node conditions that make a node unhealthy once held for `duration`.",
                    "items": {
                        "type": "object",
                        "additionalProperties": false,
                        "required": ["type", "status", "duration"],
                        "properties": {
                            "type": {"type": "string"},
                            "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                            "duration": {"type": "string"},
                        },
                    },
                },
                "remediationTemplate": object("The remediator's template (apiVersion, kind, name, namespace; an empty namespace is the release's)."),
            },
        }},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_refuse_unknown_keys_and_extensions_are_gone() {
        let schema = values_schema().unwrap();
        let text = schema.to_string();
        assert!(!text.contains("x-kubernetes-"), "an extension was kept");
        let plugin = &schema["properties"]["devicePlugin"];
        assert_eq!(plugin["additionalProperties"], false);
        assert_eq!(
            plugin["properties"]["config"]["additionalProperties"],
            false
        );
        assert!(plugin["properties"]["config"]["properties"]["data"].is_object());
        assert_eq!(
            schema["properties"]["mig"]["properties"]["strategy"]["enum"],
            json!(["none", "single", "mixed"])
        );
        let upgrade = &schema["properties"]["driver"]["properties"]["upgradePolicy"]["properties"];
        assert!(upgrade["gpuPodDeletion"].is_object() && upgrade["podDeletion"].is_null());
    }

    #[test]
    fn int_or_string_becomes_any_of() {
        let converted = convert(&json!({"x-kubernetes-int-or-string": true, "type": "string"}));
        assert_eq!(
            converted,
            json!({"anyOf": [{"type": "integer"}, {"type": "string"}]})
        );
    }
}
