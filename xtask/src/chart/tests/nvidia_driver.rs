//! `driver.nvidiaDriverCRD`: off by default (no NVIDIADriver, the ClusterPolicy keeps the
//! driver); on, the ClusterPolicy hands the driver over (`useNvidiaDriverCRD: true`, only the
//! switch, `hostNetwork` and `upgradePolicy` left) and the chart renders NVIDIA's default
//! NVIDIADriver from the `driver.*` values, every field one the CRD's schema knows (nothing the API
//! server would prune). That the API server stores it and the operator serves it is the `chart`
//! e2e. Needs the harness's helm.

use serde_json::{Value, json};

use super::{find, render};
use crate::codegen::workspace_root;

fn nvidia_drivers(docs: &[Value]) -> Vec<&Value> {
    docs.iter()
        .filter(|d| d["kind"] == "NVIDIADriver")
        .collect()
}

/// The paths in `value` that `schema` (an OpenAPI v3 schema of a CRD) does not declare.
pub(super) fn undeclared(schema: &Value, value: &Value, path: &str, out: &mut Vec<String>) {
    if schema["x-kubernetes-preserve-unknown-fields"] == true {
        return;
    }
    match value {
        Value::Object(fields) => {
            for (key, field) in fields {
                let declared = schema["properties"]
                    .get(key)
                    .or_else(|| schema.get("additionalProperties").filter(|a| a.is_object()));
                match declared {
                    Some(inner) => undeclared(inner, field, &format!("{path}.{key}"), out),
                    None => out.push(format!("{path}.{key}")),
                }
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                undeclared(&schema["items"], item, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

fn spec_schema() -> Value {
    let path = workspace_root().join("crds/nvidiadrivers.nvidia.com.yaml");
    let crd: Value = serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"].clone()
}

#[test]
#[ignore = "runs helm: `cargo xtask cluster up` builds it, `cargo xtask ci` runs this"]
fn the_default_nvidia_driver_is_rendered_from_the_driver_values_when_switched_on() {
    let docs = render(&[]);
    assert!(nvidia_drivers(&docs).is_empty(), "off by default");
    let driver = &find(&docs, "ClusterPolicy", "cluster-policy")["spec"]["driver"];
    assert_eq!(driver["useNvidiaDriverCRD"], false);
    assert_eq!(
        driver["version"], "595.91.07",
        "the policy keeps the driver"
    );

    let docs = render(&[
        "--set",
        "driver.nvidiaDriverCRD.enabled=true,driver.nvidiaDriverCRD.nodeSelector.pool=a,\
         driver.repoConfig.configMapName=repo,driver.licensingConfig.secretName=nls,gds.enabled=true",
    ]);
    let driver = &find(&docs, "ClusterPolicy", "cluster-policy")["spec"]["driver"];
    let mut keys: Vec<&str> = driver
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "enabled",
            "hostNetwork",
            "upgradePolicy",
            "useNvidiaDriverCRD"
        ]
    );
    assert_eq!(driver["useNvidiaDriverCRD"], true);
    let found = nvidia_drivers(&docs);
    assert_eq!(found.len(), 1);
    let cr = found[0];
    assert_eq!(cr["apiVersion"], "nvidia.com/v1alpha1");
    assert_eq!(cr["metadata"]["name"], "default");
    let spec = &cr["spec"];
    for (field, expected) in [
        ("default", json!(true)),
        ("driverType", json!("gpu")),
        ("repository", json!("nvcr.io/nvidia")),
        ("image", json!("driver")),
        ("version", json!("595.91.07")),
        ("kernelModuleType", json!("auto")),
        ("usePrecompiled", json!(false)),
        ("nodeSelector", json!({"pool": "a"})),
        ("repoConfig", json!({"name": "repo"})),
        (
            "licensingConfig",
            json!({"secretName": "nls", "nlsEnabled": true}),
        ),
        ("priorityClassName", json!("system-node-critical")),
        (
            "tolerations",
            json!([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]),
        ),
    ] {
        assert_eq!(spec[field], expected, "spec.{field}");
    }
    assert_eq!(spec["manager"]["image"], "k8s-driver-manager");
    assert_eq!(spec["upgradePolicy"]["podDeletion"]["timeoutSeconds"], 300);
    assert!(spec["upgradePolicy"]["gpuPodDeletion"].is_null());
    assert_eq!(spec["gds"]["enabled"], true);
    assert!(spec["gdrcopy"].is_null(), "off: not rendered");
    let mut unknown = Vec::new();
    undeclared(&spec_schema(), spec, "spec", &mut unknown);
    assert!(
        unknown.is_empty(),
        "not in the NVIDIADriver CRD: {unknown:?}"
    );

    let docs = render(&[
        "--set",
        "driver.nvidiaDriverCRD.enabled=true,driver.nvidiaDriverCRD.driverType=vgpu-host-manager",
    ]);
    assert_eq!(
        nvidia_drivers(&docs)[0]["spec"]["driverType"],
        "vgpu-host-manager"
    );
    let docs = render(&[
        "--set",
        "driver.nvidiaDriverCRD.enabled=true,driver.nvidiaDriverCRD.deployDefaultCR=false",
    ]);
    assert!(nvidia_drivers(&docs).is_empty(), "bring your own");
    assert_eq!(
        find(&docs, "ClusterPolicy", "cluster-policy")["spec"]["driver"]["useNvidiaDriverCRD"],
        true
    );
    let docs = render(&[
        "--set",
        "driver.enabled=false,driver.nvidiaDriverCRD.enabled=true",
    ]);
    assert!(
        nvidia_drivers(&docs).is_empty(),
        "no driver, no NVIDIADriver"
    );
}
