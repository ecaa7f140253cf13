//! Gating of both plugins (sandbox workloads, mode, section) and every field of their sections.

use gpu_operator_api::spec::{
    KataSandboxDevicePluginSpec, SandboxDevicePluginSpec, SandboxMode, SandboxWorkloadsSpec,
};
use gpu_operator_core::fixtures;
use serde_json::json;

use super::*;
use crate::flavor::{KATA, KUBEVIRT};

/// `spec` with sandbox workloads `sandbox` in `mode`, and `section` as both plugins' sections.
fn spec(
    sandbox: Option<bool>,
    mode: Option<SandboxMode>,
    section: &serde_json::Value,
) -> ClusterPolicySpec {
    ClusterPolicySpec {
        sandbox_workloads: Some(SandboxWorkloadsSpec {
            enabled: sandbox,
            mode,
            ..SandboxWorkloadsSpec::default()
        }),
        sandbox_device_plugin: Some(
            serde_json::from_value::<SandboxDevicePluginSpec>(section.clone()).unwrap(),
        ),
        kata_sandbox_device_plugin: Some(
            serde_json::from_value::<KataSandboxDevicePluginSpec>(section.clone()).unwrap(),
        ),
        ..ClusterPolicySpec::default()
    }
}

fn check(flavor: &'static Flavor, spec: &ClusterPolicySpec) -> Result<Option<Input>, Error> {
    fixtures::with_cluster(&fixtures::image_env, |cluster| {
        validate(flavor, spec, cluster)
    })
}

#[test]
fn each_plugin_is_deployed_only_in_its_mode_with_sandbox_workloads_and_its_section_on() {
    // NVIDIA: `sandboxEnabled && <section>.IsEnabled() && mode == <mode>`; an unset `enabled` is
    // false, an unset mode is `kubevirt` (the CRD default).
    let on = json!({"enabled": true});
    let kata = Some(SandboxMode::Kata);
    let kubevirt = Some(SandboxMode::Kubevirt);
    for (sandbox, mode, section, kubevirt_on, kata_on) in [
        (Some(true), None, &on, true, false),
        (Some(true), kubevirt, &on, true, false),
        (Some(true), kata, &on, false, true),
        (Some(true), None, &json!({}), false, false),
        (Some(true), kata, &json!({"enabled": false}), false, false),
        (Some(false), None, &on, false, false),
        (None, kata, &on, false, false),
    ] {
        let spec = spec(sandbox, mode, section);
        let case = format!("{sandbox:?} {mode:?} {section}");
        assert_eq!(
            check(&KUBEVIRT, &spec).unwrap().is_some(),
            kubevirt_on,
            "{case}"
        );
        assert_eq!(check(&KATA, &spec).unwrap().is_some(), kata_on, "{case}");
    }
    let mut no_sections = spec(Some(true), None, &on);
    no_sections.sandbox_device_plugin = None;
    no_sections.kata_sandbox_device_plugin = None;
    assert!(check(&KUBEVIRT, &no_sections).unwrap().is_none());
    assert!(check(&KATA, &no_sections).unwrap().is_none());
    assert!(
        check(&KUBEVIRT, &ClusterPolicySpec::default())
            .unwrap()
            .is_none()
    );
}

#[test]
fn the_images_fall_back_to_the_operators_variables() {
    let on = json!({"enabled": true});
    let input = check(&KUBEVIRT, &spec(Some(true), None, &on))
        .unwrap()
        .unwrap();
    assert_eq!(input.image, "registry.example.com/sandbox-device-plugin:v1");
    assert_eq!(input.validator_image, "registry.example.com/validator:v1");
    assert_eq!(input.namespace, "gpu-operator");
    let input = check(&KATA, &spec(Some(true), Some(SandboxMode::Kata), &on))
        .unwrap()
        .unwrap();
    assert_eq!(
        input.image,
        "registry.example.com/kata-sandbox-device-plugin:v1"
    );
}

#[test]
fn every_field_of_the_section_is_read() {
    let section = json!({
        "enabled": true,
        "repository": "nvcr.io/nvidia", "image": "kubevirt-gpu-device-plugin",
        "version": "v1.6.0",
        "imagePullPolicy": "Always", "imagePullSecrets": ["plugin-secret"],
        "resources": {"limits": {"memory": "1Gi"}},
        "args": ["--verbose"],
        "env": [{"name": "A", "value": "1"}],
        "hostNetwork": true
    });
    for (flavor, mode) in [(&KUBEVIRT, None), (&KATA, Some(SandboxMode::Kata))] {
        let input = check(flavor, &spec(Some(true), mode, &section))
            .unwrap()
            .unwrap();
        assert_eq!(
            input.image,
            "nvcr.io/nvidia/kubevirt-gpu-device-plugin:v1.6.0"
        );
        assert_eq!(input.component.pull_policy, "Always");
        assert_eq!(input.component.pull_secrets, ["plugin-secret"]);
        assert!(input.component.resources.is_some());
        assert_eq!(input.component.args, ["--verbose"]);
        assert_eq!(input.component.user_env("A"), Some("1"));
        assert!(input.component.host_network);
    }
}

#[test]
fn an_image_nobody_names_is_an_error_naming_the_section() {
    let on = json!({"enabled": true});
    let nothing = |_: &str| None;
    for (flavor, mode) in [(&KUBEVIRT, None), (&KATA, Some(SandboxMode::Kata))] {
        let enabled = spec(Some(true), mode, &on);
        let error = fixtures::with_cluster(&nothing, |cluster| validate(flavor, &enabled, cluster))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(flavor.section) && error.contains(flavor.image_env),
            "{error}"
        );
    }
    let only_plugin = |name: &str| (name == KUBEVIRT.image_env).then(|| "plugin:1".to_owned());
    let enabled = spec(Some(true), None, &on);
    let error = fixtures::with_cluster(&only_plugin, |cluster| {
        validate(&KUBEVIRT, &enabled, cluster)
    })
    .unwrap_err()
    .to_string();
    assert!(error.contains("VALIDATOR_IMAGE"), "{error}");
}
