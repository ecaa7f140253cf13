//! The ClusterPolicy API on a real API server: the generated CRD installs, NVIDIA-style
//! ClusterPolicies apply unchanged and keep every field, the documented `kubectl patch`
//! commands work, and the schema's enums and CEL rules reject mistakes with their messages. The
//! same for the NVIDIADriver API in `nvidia_driver`.
#![cfg(feature = "e2e")]

mod nvidia_driver;

use std::{io::Write as _, process::Stdio};

use anyhow::{Context as _, bail};
use gpu_operator_api::cel;
use gpu_operator_harness::{
    access::kubectl_ok,
    crd::{ensure_crd, repo_root},
    kubectl, unique_name,
};
use serde_json::{Value, json};

const FIELD_MANAGER: &str = "gpu-operator-e2e";

/// Deletes a ClusterPolicy when dropped, so a failing test cleans up too.
struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = kubectl_ok(&[
            "delete",
            "clusterpolicy",
            &self.0,
            "--ignore-not-found",
            "--wait=false",
        ]);
    }
}

/// Runs kubectl with `input` on stdin; returns whether it succeeded, and stdout plus stderr.
fn kubectl_with_input(args: &[&str], input: &str) -> anyhow::Result<(bool, String)> {
    let mut child = kubectl()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("running kubectl")?;
    child
        .stdin
        .take()
        .context("kubectl stdin")?
        .write_all(input.as_bytes())?;
    let output = child.wait_with_output()?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok((output.status.success(), text))
}

/// Server-side applies `policy` (strict field validation: unknown fields are errors).
fn apply(policy: &Value) -> anyhow::Result<(bool, String)> {
    kubectl_with_input(
        &[
            "apply",
            "--server-side",
            "--field-manager",
            FIELD_MANAGER,
            "--validate=strict",
            "-f",
            "-",
        ],
        &policy.to_string(),
    )
}

fn get(name: &str) -> anyhow::Result<Value> {
    Ok(serde_json::from_str(&kubectl_ok(&[
        "get",
        "clusterpolicy",
        name,
        "-o",
        "json",
    ])?)?)
}

fn patch(name: &str, kind: &str, body: &str) -> anyhow::Result<(bool, String)> {
    let output = kubectl()
        .args(["patch", "clusterpolicy", name, "--type", kind, "-p", body])
        .output()?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok((output.status.success(), text))
}

/// The ClusterPolicy documents of an example file.
fn example(file: &str) -> anyhow::Result<Vec<Value>> {
    let text = std::fs::read_to_string(repo_root().join("manifests/examples").join(file))?;
    let mut policies = Vec::new();
    for document in serde_yaml::Deserializer::from_str(&text) {
        let value: Value = serde::Deserialize::deserialize(document)?;
        if value["kind"] == "ClusterPolicy" {
            policies.push(value);
        }
    }
    Ok(policies)
}

/// `policy` renamed to a fresh unique name.
fn renamed(mut policy: Value, prefix: &str) -> (String, Value) {
    let name = unique_name(prefix);
    policy["metadata"] = json!({ "name": name });
    (name, policy)
}

/// Fails unless every field of `expected` is in `actual` with the same value (`actual` may have
/// more: the API server's defaults).
fn assert_contains(actual: &Value, expected: &Value, path: &str) -> anyhow::Result<()> {
    match (actual, expected) {
        (Value::Object(actual), Value::Object(expected)) => {
            for (key, value) in expected {
                let child = actual
                    .get(key)
                    .with_context(|| format!("{path}.{key} was dropped"))?;
                assert_contains(child, value, &format!("{path}.{key}"))?;
            }
            Ok(())
        }
        (actual, expected) if actual == expected => Ok(()),
        (actual, expected) => bail!("{path} reads back as {actual}, written as {expected}"),
    }
}

#[tokio::test]
async fn every_example_applies_and_keeps_its_fields() -> anyhow::Result<()> {
    ensure_crd().await?;
    for file in [
        "chart-defaults.yaml",
        "time-slicing.yaml",
        "mig-mixed.yaml",
        "driver-preinstalled.yaml",
        "minimal.yaml",
    ] {
        for policy in example(file)? {
            let (name, policy) = renamed(policy, "cp-example");
            let _cleanup = Cleanup(name.clone());
            let (ok, output) = apply(&policy)?;
            assert!(ok, "{file} does not apply: {output}");
            let stored = get(&name)?;
            assert_contains(&stored["spec"], &policy["spec"], "spec")
                .with_context(|| format!("reading back {file}"))?;
        }
    }
    Ok(())
}

#[tokio::test]
async fn every_field_reads_back_identical() -> anyhow::Result<()> {
    ensure_crd().await?;
    let fixture = repo_root().join("crates/gpu-operator-api/tests/fixtures/every-field.yaml");
    let policy: Value = serde_yaml::from_str(&std::fs::read_to_string(fixture)?)?;
    let (name, policy) = renamed(policy, "cp-every-field");
    let _cleanup = Cleanup(name.clone());
    let (ok, output) = apply(&policy)?;
    assert!(ok, "the every-field ClusterPolicy does not apply: {output}");
    assert_eq!(
        get(&name)?["spec"],
        policy["spec"],
        "a field was pruned or changed"
    );
    Ok(())
}

#[tokio::test]
async fn unknown_fields_are_reported_not_dropped() -> anyhow::Result<()> {
    ensure_crd().await?;
    let mut policy = example("minimal.yaml")?.remove(0);
    policy["spec"]["devicePlugin"]["notAField"] = json!(true);
    let (name, policy) = renamed(policy, "cp-unknown");
    let _cleanup = Cleanup(name);
    let (ok, output) = apply(&policy)?;
    assert!(!ok, "an unknown field was accepted");
    assert!(
        output.contains("notAField"),
        "the error does not name the field: {output}"
    );
    Ok(())
}

#[tokio::test]
async fn documented_patches_succeed_and_read_back() -> anyhow::Result<()> {
    ensure_crd().await?;
    let (name, policy) = renamed(example("chart-defaults.yaml")?.remove(0), "cp-patch");
    let _cleanup = Cleanup(name.clone());
    let (ok, output) = apply(&policy)?;
    assert!(ok, "chart defaults do not apply: {output}");

    let (ok, output) = patch(
        &name,
        "json",
        r#"[{"op":"replace","path":"/spec/mig/strategy","value":"mixed"}]"#,
    )?;
    assert!(ok, "the MIG strategy patch failed: {output}");
    let (ok, output) = patch(
        &name,
        "merge",
        r#"{"spec":{"devicePlugin":{"config":{"name":"time-slicing-config","default":"any"}}}}"#,
    )?;
    assert!(ok, "the device plugin config patch failed: {output}");

    let stored = get(&name)?;
    assert_eq!(stored["spec"]["mig"]["strategy"], "mixed");
    assert_eq!(
        stored["spec"]["devicePlugin"]["config"],
        json!({ "name": "time-slicing-config", "default": "any" })
    );
    Ok(())
}

#[tokio::test]
async fn mistakes_are_rejected_with_a_message_naming_the_fix() -> anyhow::Result<()> {
    ensure_crd().await?;
    let (name, policy) = renamed(example("chart-defaults.yaml")?.remove(0), "cp-reject");
    let _cleanup = Cleanup(name.clone());
    let (ok, output) = apply(&policy)?;
    assert!(ok, "chart defaults do not apply: {output}");

    let (ok, output) = patch(
        &name,
        "json",
        r#"[{"op":"replace","path":"/spec/mig/strategy","value":"auto"}]"#,
    )?;
    assert!(!ok, "MIG strategy auto was accepted");
    assert!(
        output.contains("spec.mig.strategy") && output.contains(r#"Unsupported value: "auto""#),
        "unexpected error: {output}"
    );
    assert!(
        output.contains(r#""none", "single", "mixed""#),
        "values not listed: {output}"
    );

    // Removing the repository leaves image and version: a partial image.
    let (ok, output) = patch(
        &name,
        "merge",
        r#"{"spec":{"devicePlugin":{"repository":null}}}"#,
    )?;
    assert!(!ok, "a partial image was accepted");
    assert!(
        output.contains("spec.devicePlugin")
            && output.contains(cel::IMAGE_COMPLETE_UNLESS_DISABLED.message),
        "unexpected error: {output}"
    );

    let (ok, output) = patch(
        &name,
        "merge",
        r#"{"spec":{"cdi":{"enabled":false,"nriPluginEnabled":true}}}"#,
    )?;
    assert!(!ok, "NRI without CDI was accepted");
    assert!(
        output.contains("spec.cdi.nriPluginEnabled")
            && output.contains(cel::NRI_NEEDS_CDI_AND_TOOLKIT.message),
        "unexpected error: {output}"
    );

    let (ok, output) = patch(
        &name,
        "merge",
        r#"{"spec":{"devicePlugin":{"config":{"default":"any"}}}}"#,
    )?;
    assert!(
        !ok,
        "devicePlugin.config.default without a name was accepted"
    );
    assert!(
        output.contains(cel::DEVICE_PLUGIN_DEFAULT_NEEDS_NAME.message),
        "unexpected error: {output}"
    );

    let (ok, output) = patch(
        &name,
        "merge",
        r#"{"spec":{"daemonsets":{"rollingUpdate":{"maxUnavailable":"one"}}}}"#,
    )?;
    assert!(!ok, "maxUnavailable \"one\" was accepted");
    assert!(
        output.contains(cel::MAX_UNAVAILABLE_FORMAT.message),
        "unexpected error: {output}"
    );

    // A MIG config name other than all-disabled is accepted (our deliberate extension).
    let (ok, output) = patch(
        &name,
        "merge",
        r#"{"spec":{"migManager":{"config":{"default":"all-1g.10gb"}}}}"#,
    )?;
    assert!(ok, "a custom MIG default config was rejected: {output}");

    // Rejected at creation too, not only on update.
    let mut partial = example("minimal.yaml")?.remove(0);
    partial["spec"]["toolkit"] = json!({ "version": "v1.17.0" });
    let (partial_name, partial) = renamed(partial, "cp-partial");
    let _cleanup_partial = Cleanup(partial_name);
    let (ok, output) = apply(&partial)?;
    assert!(!ok, "a partial toolkit image was accepted at creation");
    assert!(
        output.contains(cel::IMAGE_COMPLETE_UNLESS_DISABLED.message),
        "unexpected error: {output}"
    );
    Ok(())
}
