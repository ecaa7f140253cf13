//! Structural checks of the generated CRD: identity, required sections, enums, defaults,
//! descriptions, and where the CEL rules sit.

use gpu_operator_api::{ClusterPolicy, cel};
use kube::CustomResourceExt as _;
use serde_json::{Value, json};

use super::{crd_schema, schema_at};

#[test]
fn crd_identity_matches_nvidia() {
    let crd = serde_json::to_value(ClusterPolicy::crd()).unwrap();
    assert_eq!(crd["metadata"]["name"], "clusterpolicies.nvidia.com");
    assert_eq!(crd["spec"]["group"], "nvidia.com");
    assert_eq!(crd["spec"]["scope"], "Cluster");
    assert_eq!(crd["spec"]["names"]["kind"], "ClusterPolicy");
    assert_eq!(crd["spec"]["names"]["plural"], "clusterpolicies");
    assert_eq!(crd["spec"]["names"]["singular"], "clusterpolicy");
    let version = &crd["spec"]["versions"][0];
    assert_eq!(version["name"], "v1");
    assert_eq!(version["served"], true);
    assert_eq!(version["storage"], true);
    assert_eq!(version["subresources"], json!({ "status": {} }));
    let columns = &version["additionalPrinterColumns"];
    assert_eq!(columns[0]["name"], "Status");
    assert_eq!(columns[0]["jsonPath"], ".status.state");
    assert_eq!(columns[1]["name"], "Age");
    assert_eq!(columns[1]["jsonPath"], ".metadata.creationTimestamp");
}

#[test]
fn required_sections_match_nvidia() {
    let mut required: Vec<String> =
        serde_json::from_value(schema_at("spec")["required"].clone()).unwrap();
    required.sort();
    let expected = [
        "daemonsets",
        "dcgm",
        "dcgmExporter",
        "devicePlugin",
        "driver",
        "gfd",
        "nodeStatusExporter",
        "operator",
        "toolkit",
    ];
    assert_eq!(required, expected);
    assert_eq!(schema_at("status")["required"], json!(["state"]));
}

#[test]
fn enums_and_defaults_match_nvidia() {
    let cases = [
        (
            "spec.mig.strategy",
            json!(["none", "single", "mixed"]),
            Value::Null,
        ),
        (
            "spec.driver.kernelModuleType",
            json!(["auto", "open", "proprietary"]),
            json!("auto"),
        ),
        (
            "spec.daemonsets.updateStrategy",
            json!(["RollingUpdate", "OnDelete"]),
            json!("RollingUpdate"),
        ),
        (
            "spec.sandboxWorkloads.defaultWorkload",
            json!(["container", "vm-passthrough", "vm-vgpu"]),
            json!("container"),
        ),
        (
            "spec.sandboxWorkloads.mode",
            json!(["kubevirt", "kata"]),
            json!("kubevirt"),
        ),
        (
            "spec.ccManager.defaultMode",
            json!(["on", "off", "devtools"]),
            Value::Null,
        ),
        (
            "status.state",
            json!(["ignored", "ready", "notReady"]),
            Value::Null,
        ),
    ];
    for (path, values, default) in cases {
        let schema = schema_at(path);
        assert_eq!(schema["enum"], values, "enum of {path}");
        assert_eq!(schema["default"], default, "default of {path}");
    }
    let defaults = [
        ("spec.operator.runtimeClass", json!("nvidia")),
        ("spec.toolkit.installDir", json!("/usr/local/nvidia")),
        ("spec.devicePlugin.mps.root", json!("/run/nvidia/mps")),
        ("spec.migManager.config.default", json!("all-disabled")),
        ("spec.vgpuDeviceManager.config.default", json!("default")),
        ("spec.cdi.enabled", json!(true)),
        ("spec.cdi.default", json!(false)),
        ("spec.cdi.nriPluginEnabled", json!(false)),
        ("spec.hostPaths.kubeletRootDir", json!("/var/lib/kubelet")),
        ("spec.driver.upgradePolicy.autoUpgrade", json!(false)),
        ("spec.driver.upgradePolicy.maxParallelUpgrades", json!(1)),
        ("spec.driver.upgradePolicy.maxUnavailable", json!("25%")),
        (
            "spec.driver.upgradePolicy.podDeletion.timeoutSeconds",
            json!(300),
        ),
        ("spec.driver.upgradePolicy.drain.timeoutSeconds", json!(300)),
        (
            "spec.driver.upgradePolicy.waitForCompletion.timeoutSeconds",
            json!(0),
        ),
        (
            "spec.kataManager.config.artifactsDir",
            json!("/opt/nvidia-gpu-operator/artifacts/runtimeclasses"),
        ),
    ];
    for (path, default) in defaults {
        assert_eq!(schema_at(path)["default"], default, "default of {path}");
    }
    // The deliberate exception: any MIG config name, not only NVIDIA's `all-disabled`.
    assert_eq!(
        schema_at("spec.migManager.config.default")["enum"],
        Value::Null
    );
    assert_eq!(
        schema_at("spec.driver.startupProbe.periodSeconds")["minimum"],
        json!(1.0)
    );
    assert_eq!(schema_at("spec.driver.image")["pattern"], r"[a-zA-Z0-9\-]+");
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
fn every_format_is_one_the_api_server_knows() {
    // The formats kube-apiserver validates (apiextensions-apiserver's `supportedFormats` and
    // OpenAPI's numeric formats, a hand copy); any other draws `Warning: unrecognized format` on
    // every apply of the CRD, which `helm install` prints.
    let known = [
        "int32",
        "int64",
        "float",
        "double",
        "byte",
        "binary",
        "password",
        "date",
        "date-time",
        "datetime",
        "duration",
        "uri",
        "email",
        "hostname",
        "ipv4",
        "ipv6",
        "cidr",
        "mac",
        "uuid",
    ];
    let mut unknown = Vec::new();
    walk(&crd_schema(), "", &mut |path, schema| {
        if let Some(format) = schema.get("format").and_then(Value::as_str)
            && !known.contains(&format)
        {
            unknown.push(format!("{path}: {format}"));
        }
    });
    assert!(unknown.is_empty(), "{unknown:#?}");
}

#[test]
fn every_field_has_a_description() {
    let mut missing = Vec::new();
    walk(&crd_schema(), "", &mut |path, schema| {
        let is_property = !path.is_empty() && !path.ends_with("[]");
        if is_property && schema.get("description").is_none() {
            missing.push(path.to_owned());
        }
    });
    // kube's root object and its metadata carry no description of ours.
    missing.retain(|p| p != ".metadata" && p != ".apiVersion" && p != ".kind");
    assert!(
        missing.is_empty(),
        "fields without a description: {missing:?}"
    );
}

#[test]
fn schema_is_structural_and_free_of_nulls() {
    walk(&crd_schema(), "", &mut |path, schema| {
        let nullable_ok = [".status", ".spec.driver.upgradePolicy.maxUnavailable"];
        if schema.get("nullable").is_some() {
            assert!(nullable_ok.contains(&path), "unexpected nullable at {path}");
        }
        for key in ["oneOf", "anyOf", "allOf", "$ref", "const", "title"] {
            assert!(
                path.is_empty() || schema.get(key).is_none(),
                "{key} at {path}"
            );
        }
        if let Some(Value::Array(values)) = schema.get("enum") {
            assert!(!values.contains(&Value::Null), "null in enum at {path}");
        }
        let int_or_string = schema.get("x-kubernetes-int-or-string").is_some();
        assert!(
            path.is_empty() || int_or_string || schema.get("type").is_some(),
            "no type at {path}"
        );
    });
}

#[test]
fn conditions_are_a_list_map_keyed_by_type() {
    let conditions = schema_at("status.conditions");
    assert_eq!(conditions["x-kubernetes-list-type"], "map");
    assert_eq!(conditions["x-kubernetes-list-map-keys"], json!(["type"]));
    let required = &conditions["items"]["required"];
    for key in ["type", "status", "reason", "message", "lastTransitionTime"] {
        assert!(
            required.as_array().unwrap().contains(&json!(key)),
            "{key} not required"
        );
    }
}

#[test]
fn every_component_with_an_image_has_the_image_rule_of_its_default() {
    // A hand-written table of which sections NVIDIA's operator deploys when `enabled` is unset
    // (reference nvidia-gpu-operator.md): their image is checked unless `enabled: false`; the
    // others only with `enabled: true`; the validator always runs.
    let unless_disabled = cel::IMAGE_COMPLETE_UNLESS_DISABLED.to_json();
    let when_enabled = cel::IMAGE_COMPLETE_WHEN_ENABLED.to_json();
    let expected: &[(&str, &Value)] = &[
        (".ccManager", &when_enabled),
        (".dcgm", &unless_disabled),
        (".dcgmExporter", &unless_disabled),
        (".devicePlugin", &unless_disabled),
        (".driver", &unless_disabled),
        (".gdrcopy", &when_enabled),
        (".gds", &when_enabled),
        (".gfd", &unless_disabled),
        (".kataManager", &when_enabled),
        (".kataSandboxDevicePlugin", &when_enabled),
        (".migManager", &unless_disabled),
        (".nodeStatusExporter", &when_enabled),
        (".sandboxDevicePlugin", &when_enabled),
        (".toolkit", &unless_disabled),
        (".validator", &cel::IMAGE_COMPLETE.to_json()),
        (".vfioManager", &when_enabled),
        (".vgpuDeviceManager", &when_enabled),
        (".vgpuManager", &when_enabled),
    ];
    let mut components = Vec::new();
    walk(&crd_schema(), "", &mut |path, schema| {
        let properties = &schema["properties"];
        if ["repository", "image", "version"]
            .iter()
            .all(|k| properties.get(k).is_some())
        {
            components.push(path.to_owned());
        }
    });
    let schema = crd_schema();
    for (path, rule) in expected {
        let section = &schema["properties"]["spec"]["properties"][&path[1..]];
        let rules = section["x-kubernetes-validations"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(rules.contains(rule), "{path} lacks {rule}");
    }
    let driver = &schema["properties"]["spec"]["properties"]["driver"];
    assert!(
        driver["x-kubernetes-validations"]
            .as_array()
            .unwrap()
            .contains(&cel::DRIVER_MANAGER_IMAGE_COMPLETE.to_json())
    );
    for sandbox in ["vgpuManager", "vfioManager"] {
        let section = &schema["properties"]["spec"]["properties"][sandbox];
        assert!(
            section["x-kubernetes-validations"]
                .as_array()
                .unwrap()
                .contains(&cel::SANDBOX_DRIVER_MANAGER_IMAGE_COMPLETE.to_json()),
            "{sandbox}.driverManager unchecked"
        );
    }
    // 18 components, the driver manager of driver, vgpuManager and vfioManager (checked from
    // their section), and the deprecated operator.initContainer (unused: not checked).
    assert_eq!(components.len(), 22, "{components:?}");
}

#[test]
fn every_rule_is_in_the_schema_and_compiles() {
    let schema = crd_schema();
    let text = schema.to_string();
    for rule in cel::all_rules() {
        assert!(
            text.contains(&Value::String(rule.rule.into()).to_string()),
            "{rule:?} not used"
        );
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
fn strings_tested_with_regexes_are_bounded() {
    // The API server rejects a CRD whose rules may cost too much; `matches` on an unbounded
    // string is the usual culprit.
    let bounded = [
        ("spec.daemonsets.rollingUpdate.maxUnavailable", 64),
        ("spec.migManager.config.default", 63),
        ("spec.operator.runtimeClass", 253),
    ];
    for (path, max) in bounded {
        assert_eq!(
            schema_at(path)["maxLength"],
            json!(max),
            "maxLength of {path}"
        );
    }
}
