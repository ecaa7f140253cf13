//! The NVIDIADriver API on a real API server: the generated CRD installs, NVIDIA's sample and a CR
//! that sets every field are stored as applied (nothing pruned; the sample gains only the two
//! defaults of NVIDIA's CRD), and the API server refuses, naming the field, a change of
//! `driverType` or `usePrecompiled`, an unknown `driverType`, and the mistakes our CEL rules
//! catch.

use anyhow::Context as _;
use gpu_operator_api::nvidia_driver::cel;
use gpu_operator_harness::{
    access::kubectl_ok, crd::ensure_crd, crd::repo_root, kubectl, unique_name,
};
use serde_json::{Value, json};

use super::{apply, assert_contains};

/// Deletes an NVIDIADriver when dropped, so a failing test cleans up too.
struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = kubectl_ok(&[
            "delete",
            "nvidiadriver",
            &self.0,
            "--ignore-not-found",
            "--wait=false",
        ]);
    }
}

fn fixture(file: &str) -> anyhow::Result<Value> {
    let path = repo_root()
        .join("crates/gpu-operator-api/tests/fixtures")
        .join(file);
    let text = std::fs::read_to_string(&path).with_context(|| path.display().to_string())?;
    Ok(serde_yaml::from_str(&text)?)
}

/// NVIDIA's sample NVIDIADriver (v26.7.0), under a fresh name.
fn nvidia_sample() -> anyhow::Result<(String, Value)> {
    Ok(renamed(fixture("nvidia-nvidiadriver-sample-v26.7.0.json")?))
}

fn renamed(mut driver: Value) -> (String, Value) {
    let name = unique_name("nvd-api");
    driver["metadata"] = json!({ "name": name });
    (name, driver)
}

fn get(name: &str) -> anyhow::Result<Value> {
    Ok(serde_json::from_str(&kubectl_ok(&[
        "get",
        "nvidiadriver",
        name,
        "-o",
        "json",
    ])?)?)
}

fn merge_patch(name: &str, body: &Value) -> anyhow::Result<(bool, String)> {
    let output = kubectl()
        .args(["patch", "nvidiadriver", name, "--type", "merge", "-p"])
        .arg(body.to_string())
        .output()?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok((output.status.success(), text))
}

#[tokio::test]
async fn nvidias_sample_is_stored_with_only_nvidias_defaults_added() -> anyhow::Result<()> {
    ensure_crd().await?;
    let (name, sample) = nvidia_sample()?;
    let _cleanup = Cleanup(name.clone());
    let (ok, output) = apply(&sample)?;
    assert!(ok, "NVIDIA's sample does not apply: {output}");
    // What NVIDIA's v26.7.0 CRD adds to its own sample, by hand: `default` and
    // `kernelModuleType`; every other field of the sample is set.
    let mut expected = sample["spec"].clone();
    expected["default"] = json!(false);
    expected["kernelModuleType"] = json!("auto");
    assert_eq!(
        get(&name)?["spec"],
        expected,
        "a field was pruned or changed"
    );
    // The printer columns read the stored object.
    let table = kubectl_ok(&["get", "nvd", &name])?;
    assert!(
        table.contains("STATUS") && table.contains("DEFAULT") && table.contains("false"),
        "{table}"
    );
    Ok(())
}

#[tokio::test]
async fn every_field_reads_back_identical() -> anyhow::Result<()> {
    ensure_crd().await?;
    let (name, driver) = renamed(fixture("nvidiadriver-every-field.yaml")?);
    let _cleanup = Cleanup(name.clone());
    let (ok, output) = apply(&driver)?;
    assert!(ok, "the every-field NVIDIADriver does not apply: {output}");
    let stored = get(&name)?;
    assert_contains(&stored["spec"], &driver["spec"], "spec")?;
    assert_eq!(
        stored["spec"], driver["spec"],
        "a field was pruned or changed"
    );
    Ok(())
}

#[tokio::test]
async fn driver_type_and_use_precompiled_cannot_change() -> anyhow::Result<()> {
    ensure_crd().await?;
    let (name, sample) = nvidia_sample()?;
    let _cleanup = Cleanup(name.clone());
    let (ok, output) = apply(&sample)?;
    assert!(ok, "NVIDIA's sample does not apply: {output}");

    let (ok, output) = merge_patch(&name, &json!({ "spec": { "driverType": "vgpu" } }))?;
    assert!(!ok, "driverType changed");
    assert!(
        output.contains("spec.driverType") && output.contains(cel::DRIVER_TYPE_IMMUTABLE.message),
        "unexpected error: {output}"
    );
    let (ok, output) = merge_patch(&name, &json!({ "spec": { "usePrecompiled": true } }))?;
    assert!(!ok, "usePrecompiled changed");
    assert!(
        output.contains("spec.usePrecompiled")
            && output.contains(cel::USE_PRECOMPILED_IMMUTABLE.message),
        "unexpected error: {output}"
    );
    // Removed, then added: NVIDIA's rule on the field does not see it, ours does.
    let (ok, output) = merge_patch(&name, &json!({ "spec": { "usePrecompiled": null } }))?;
    assert!(ok, "removing usePrecompiled: false was refused: {output}");
    let (ok, output) = merge_patch(
        &name,
        &json!({ "spec": { "usePrecompiled": true, "version": "595" } }),
    )?;
    assert!(!ok, "usePrecompiled was added as true");
    assert!(
        output.contains("spec.usePrecompiled")
            && output.contains(cel::USE_PRECOMPILED_NOT_ADDED_OR_REMOVED.message),
        "unexpected error: {output}"
    );
    // The positive control: other fields still change.
    let (ok, output) = merge_patch(&name, &json!({ "spec": { "version": "580.105.08" } }))?;
    assert!(ok, "a version bump was refused: {output}");
    assert_eq!(get(&name)?["spec"]["version"], "580.105.08");
    Ok(())
}

#[tokio::test]
async fn bad_settings_are_refused_at_apply_naming_the_field() -> anyhow::Result<()> {
    ensure_crd().await?;
    let (_, sample) = nvidia_sample()?;
    let cases: [(&str, Value, &str, &str); 6] = [
        (
            "an unknown driverType",
            json!({ "driverType": "cuda" }),
            "spec.driverType",
            r#"supported values: "gpu", "vgpu", "vgpu-host-manager""#,
        ),
        (
            "a default with a nodeSelector",
            json!({ "default": true, "nodeSelector": { "pool": "a" } }),
            "spec.nodeSelector",
            cel::DEFAULT_HAS_NO_NODE_SELECTOR.message,
        ),
        (
            "an image without a version",
            json!({ "repository": null, "version": null, "image": "nvcr.io/nvidia/driver" }),
            "spec.version",
            cel::DRIVER_IMAGE_HAS_VERSION.message,
        ),
        (
            "precompiled with GDS",
            json!({ "usePrecompiled": true, "version": "595", "gds": { "enabled": true,
                "repository": "nvcr.io/nvidia/cloud-native", "image": "nvidia-fs", "version": "2.20.5" } }),
            "spec.usePrecompiled",
            cel::PRECOMPILED_WITHOUT_GDS_OR_GDRCOPY.message,
        ),
        (
            "the owner label in a nodeSelector",
            json!({ "nodeSelector": { "nvidia.com/gpu-operator.driver.owner": "x" } }),
            "spec.nodeSelector",
            cel::NODE_SELECTOR_WITHOUT_OWNER_LABEL.message,
        ),
        (
            "an unknown field",
            json!({ "notAField": true }),
            "spec.notAField",
            "field not declared in schema",
        ),
    ];
    for (what, patch, field, message) in cases {
        let mut driver = sample.clone();
        let spec = driver["spec"].as_object_mut().context("sample spec")?;
        for (key, value) in patch.as_object().context("patch")? {
            if value.is_null() {
                spec.remove(key);
            } else {
                spec.insert(key.clone(), value.clone());
            }
        }
        let (name, driver) = renamed(driver);
        let _cleanup = Cleanup(name);
        let (ok, output) = apply(&driver)?;
        assert!(!ok, "{what} was accepted");
        assert!(
            output.contains(field) && output.contains(message),
            "{what}: the error does not name {field} with {message:?}: {output}"
        );
    }
    Ok(())
}
