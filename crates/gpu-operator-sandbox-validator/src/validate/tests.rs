//! The sandbox validator's gate and what it reads from `spec.validator`.

use gpu_operator_api::spec::{CcManagerSpec, SandboxWorkloadsSpec, ValidatorSpec};
use gpu_operator_core::fixtures;
use serde_json::json;

use super::*;

/// `spec` with sandbox workloads `sandbox` and section `validator`.
fn spec(sandbox: Option<bool>, validator: serde_json::Value) -> ClusterPolicySpec {
    ClusterPolicySpec {
        sandbox_workloads: Some(SandboxWorkloadsSpec {
            enabled: sandbox,
            ..SandboxWorkloadsSpec::default()
        }),
        validator: Some(serde_json::from_value::<ValidatorSpec>(validator).unwrap()),
        ..ClusterPolicySpec::default()
    }
}

fn check(spec: &ClusterPolicySpec) -> Result<Option<Input>, Error> {
    fixtures::with_cluster(&fixtures::image_env, |cluster| validate(spec, cluster))
}

#[test]
fn deployed_exactly_when_sandbox_workloads_are_on() {
    // NVIDIA: `state-sandbox-validation` is enabled by `sandboxEnabled` alone.
    for (sandbox, deployed) in [(Some(true), true), (Some(false), false), (None, false)] {
        assert_eq!(
            check(&spec(sandbox, json!({}))).unwrap().is_some(),
            deployed,
            "{sandbox:?}"
        );
    }
    assert!(check(&ClusterPolicySpec::default()).unwrap().is_none());
    let mut no_section = spec(Some(true), json!({}));
    no_section.validator = None;
    assert!(check(&no_section).unwrap().is_some());
}

#[test]
fn defaults_the_validator_image_container_workload_and_no_cc_check() {
    let input = check(&spec(Some(true), json!({}))).unwrap().unwrap();
    assert_eq!(input.image, "registry.example.com/validator:v1");
    assert_eq!(input.default_workload, WorkloadConfig::Container);
    assert!(!input.cc_manager);
    assert_eq!(input.check_env, CheckEnv::default());
    assert_eq!(input.namespace, "gpu-operator");
    assert_eq!(input.component.pull_policy, "IfNotPresent");
}

#[test]
fn reads_the_validator_section_the_default_workload_and_the_cc_manager() {
    let mut spec = spec(
        Some(true),
        json!({
            "repository": "registry.local", "image": "validator", "version": "v2",
            "imagePullPolicy": "Always", "imagePullSecrets": ["s"],
            "resources": {"limits": {"memory": "1Gi"}},
            "args": ["x"], "env": [{"name": "A", "value": "1"}], "hostNetwork": true,
            "vfioPCI": {"env": [{"name": "V", "value": "1"}]},
            "vgpuManager": {"env": [{"name": "M", "value": "2"}]},
            "vgpuDevices": {"env": [{"name": "D", "value": "3"}]},
            "driver": {"env": [{"name": "NOT_HERE", "value": "0"}]}
        }),
    );
    if let Some(sandbox) = spec.sandbox_workloads.as_mut() {
        sandbox.default_workload = Some(WorkloadConfig::VmVgpu);
    }
    spec.cc_manager = Some(CcManagerSpec {
        enabled: Some(true),
        ..CcManagerSpec::default()
    });
    let input = check(&spec).unwrap().unwrap();
    assert_eq!(input.image, "registry.local/validator:v2");
    assert_eq!(input.default_workload, WorkloadConfig::VmVgpu);
    assert!(input.cc_manager);
    assert_eq!(input.check_env.vfio_pci[0].name, "V");
    assert_eq!(input.check_env.vgpu_manager[0].name, "M");
    assert_eq!(input.check_env.vgpu_devices[0].name, "D");
    assert_eq!(input.component.pull_policy, "Always");
    assert_eq!(input.component.pull_secrets, ["s"]);
    assert!(input.component.resources.is_some());
    assert_eq!(input.component.args, ["x"]);
    assert_eq!(input.component.user_env("A"), Some("1"));
    assert!(input.component.host_network);
}

#[test]
fn an_image_nobody_names_is_an_error_naming_the_section() {
    let nothing = |_: &str| None;
    let on = spec(Some(true), json!({}));
    let error = fixtures::with_cluster(&nothing, |cluster| validate(&on, cluster))
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("validator") && error.contains("VALIDATOR_IMAGE"),
        "{error}"
    );
    // Off, nothing is resolved.
    let off = spec(Some(false), json!({}));
    assert!(
        fixtures::with_cluster(&nothing, |cluster| validate(&off, cluster))
            .unwrap()
            .is_none()
    );
}
