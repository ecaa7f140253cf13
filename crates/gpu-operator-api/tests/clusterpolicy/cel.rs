//! The CEL rules evaluated locally, on good and bad ClusterPolicies.

use gpu_operator_api::cel::{self, CelRule};
use serde_json::{Value, json};

use super::{cel_errors, minimal};

/// `minimal()` with `patch` merged into its spec (JSON merge patch semantics, objects only).
fn with_spec(patch: &Value) -> Value {
    fn merge(target: &mut Value, patch: &Value) {
        match (target, patch) {
            (Value::Object(target), Value::Object(patch)) => {
                for (key, value) in patch {
                    merge(target.entry(key.clone()).or_insert(Value::Null), value);
                }
            }
            (target, patch) => *target = patch.clone(),
        }
    }
    let mut object = minimal();
    merge(&mut object["spec"], patch);
    object
}

fn assert_ok(patch: &Value) {
    assert_eq!(
        cel_errors(&with_spec(patch)),
        Vec::new(),
        "should pass: {patch}"
    );
}

fn assert_rejected(patch: &Value, rule: CelRule, field: &str) {
    let errors = cel_errors(&with_spec(patch));
    assert!(
        errors.iter().any(|(p, m)| m == rule.message && p == field),
        "{patch} should fail at {field} with {:?}; got {errors:?}",
        rule.message
    );
}

#[test]
fn image_must_be_complete_or_image_only() {
    for component in [
        "driver",
        "toolkit",
        "devicePlugin",
        "gfd",
        "dcgm",
        "dcgmExporter",
        "migManager",
    ] {
        assert_ok(&json!({ component: { "image": "registry.local/plugin@sha256:abc" } }));
        assert_ok(&json!({ component: {
            "repository": "nvcr.io/nvidia", "image": "x", "version": "v1" } }));
        assert_ok(&json!({ component: { "imagePullPolicy": "Always" } }));
        assert_ok(&json!({ component: { "repository": "", "image": "x", "version": "" } }));
        let path = format!("spec.{component}");
        let rule = cel::IMAGE_COMPLETE_UNLESS_DISABLED;
        assert_rejected(&json!({ component: { "version": "v1" } }), rule, &path);
        assert_rejected(
            &json!({ component: { "enabled": true, "repository": "nvcr.io/nvidia", "image": "x" } }),
            rule,
            &path,
        );
        assert_rejected(
            &json!({ component: { "repository": "nvcr.io/nvidia", "version": "v1" } }),
            rule,
            &path,
        );
    }
    assert_rejected(
        &json!({ "driver": { "manager": { "version": "v0.8.0" } } }),
        cel::DRIVER_MANAGER_IMAGE_COMPLETE,
        "spec.driver.manager",
    );
    assert_rejected(
        &json!({ "vgpuManager": { "enabled": true, "repository": "r", "version": "v" } }),
        cel::IMAGE_COMPLETE_WHEN_ENABLED,
        "spec.vgpuManager",
    );
    assert_rejected(
        &json!({ "validator": { "repository": "r", "image": "gpu-operator" } }),
        cel::IMAGE_COMPLETE,
        "spec.validator",
    );
}

/// NVIDIA's operator resolves the image of a section only when it deploys that section, so a
/// disabled section with a half-written image runs there and must be accepted here.
#[test]
fn a_partial_image_in_a_disabled_section_is_accepted() {
    for component in [
        "driver",
        "toolkit",
        "devicePlugin",
        "gfd",
        "dcgm",
        "dcgmExporter",
        "migManager",
    ] {
        assert_ok(&json!({ component: { "enabled": false, "version": "v1" } }));
        assert_ok(&json!({ component: {
            "enabled": false, "repository": "nvcr.io/nvidia", "image": "x" } }));
    }
    assert_ok(&json!({ "driver": { "enabled": false, "manager": { "version": "v0.8.0" } } }));
    // Sections that are off unless `enabled: true`: unchecked while off.
    for component in [
        "gds",
        "gdrcopy",
        "nodeStatusExporter",
        "vgpuManager",
        "vgpuDeviceManager",
        "vfioManager",
        "kataManager",
        "sandboxDevicePlugin",
        "kataSandboxDevicePlugin",
        "ccManager",
    ] {
        assert_ok(&json!({ component: { "repository": "nvcr.io/nvidia", "image": "x" } }));
        assert_ok(&json!({ component: { "enabled": false, "version": "v1" } }));
        assert_rejected(
            &json!({ component: { "enabled": true, "version": "v1" } }),
            cel::IMAGE_COMPLETE_WHEN_ENABLED,
            &format!("spec.{component}"),
        );
    }
    assert_ok(&json!({ "vfioManager": { "driverManager": { "version": "v0.8.0" } } }));
    assert_rejected(
        &json!({ "vfioManager": { "enabled": true, "driverManager": { "version": "v0.8.0" } } }),
        cel::SANDBOX_DRIVER_MANAGER_IMAGE_COMPLETE,
        "spec.vfioManager.driverManager",
    );
}

#[test]
fn nri_plugin_needs_cdi_and_toolkit() {
    assert_ok(&json!({ "cdi": { "nriPluginEnabled": true } }));
    assert_ok(
        &json!({ "cdi": { "enabled": true, "nriPluginEnabled": true },
                       "toolkit": { "enabled": true } }),
    );
    assert_ok(&json!({ "cdi": { "enabled": false, "nriPluginEnabled": false } }));
    let path = "spec.cdi.nriPluginEnabled";
    let rule = cel::NRI_NEEDS_CDI_AND_TOOLKIT;
    assert_rejected(
        &json!({ "cdi": { "enabled": false, "nriPluginEnabled": true } }),
        rule,
        path,
    );
    assert_rejected(
        &json!({ "cdi": { "nriPluginEnabled": true }, "toolkit": { "enabled": false } }),
        rule,
        path,
    );
}

#[test]
fn rolling_update_max_unavailable_is_a_count_or_percentage() {
    for good in ["1", "3", "10%", "100%", ""] {
        assert_ok(&json!({ "daemonsets": { "rollingUpdate": { "maxUnavailable": good } } }));
    }
    let path = "spec.daemonsets.rollingUpdate.maxUnavailable";
    for bad in ["one", "10 %", "-1", "1.5", "101%", "%"] {
        assert_rejected(
            &json!({ "daemonsets": { "rollingUpdate": { "maxUnavailable": bad } } }),
            cel::MAX_UNAVAILABLE_FORMAT,
            path,
        );
    }
    for zero in ["0", "0%", "00"] {
        assert_rejected(
            &json!({ "daemonsets": { "rollingUpdate": { "maxUnavailable": zero } } }),
            cel::MAX_UNAVAILABLE_NOT_ZERO,
            path,
        );
    }
}

#[test]
fn upgrade_max_unavailable_is_a_count_or_percentage() {
    for good in [json!(1), json!(0), json!("25%"), json!("2")] {
        assert_ok(&json!({ "driver": { "upgradePolicy": { "maxUnavailable": good } } }));
    }
    for bad in ["a quarter", "25 %", "250%"] {
        assert_rejected(
            &json!({ "driver": { "upgradePolicy": { "maxUnavailable": bad } } }),
            cel::UPGRADE_MAX_UNAVAILABLE_FORMAT,
            "spec.driver.upgradePolicy.maxUnavailable",
        );
    }
}

#[test]
fn device_plugin_default_needs_a_config_name() {
    assert_ok(&json!({ "devicePlugin": { "config": { "name": "time-slicing-config" } } }));
    assert_ok(&json!({ "devicePlugin": { "config": {
        "name": "time-slicing-config", "default": "any" } } }));
    assert_ok(&json!({ "devicePlugin": { "config": { "name": "", "default": "" } } }));
    for config in [
        json!({ "default": "any" }),
        json!({ "name": "", "default": "any" }),
    ] {
        assert_rejected(
            &json!({ "devicePlugin": { "config": config } }),
            cel::DEVICE_PLUGIN_DEFAULT_NEEDS_NAME,
            "spec.devicePlugin.config.default",
        );
    }
}

#[test]
fn mig_manager_default_accepts_any_label_safe_config_name() {
    for good in [
        "all-disabled",
        "all-1g.10gb",
        "all-balanced",
        "custom_A100",
        "",
    ] {
        assert_ok(&json!({ "migManager": { "config": { "default": good } } }));
    }
    for bad in ["all 1g", "-leading", "trailing.", "a/b"] {
        assert_rejected(
            &json!({ "migManager": { "config": { "default": bad } } }),
            cel::MIG_DEFAULT_CONFIG_NAME,
            "spec.migManager.config.default",
        );
    }
}

#[test]
fn runtime_class_is_a_valid_name() {
    for good in ["nvidia", "nvidia-cdi", "nvidia.legacy"] {
        assert_ok(&json!({ "operator": { "runtimeClass": good } }));
    }
    for bad in ["Nvidia", "nvidia_cdi", "-nvidia"] {
        assert_rejected(
            &json!({ "operator": { "runtimeClass": bad } }),
            cel::RUNTIME_CLASS_NAME,
            "spec.operator.runtimeClass",
        );
    }
}

#[test]
fn host_paths_are_absolute() {
    assert_ok(
        &json!({ "hostPaths": { "rootFS": "/", "driverInstallDir": "/run/nvidia/driver" },
                       "toolkit": { "installDir": "/opt/nvidia" },
                       "devicePlugin": { "mps": { "root": "/run/mps" } } }),
    );
    let cases = [
        (
            json!({ "hostPaths": { "rootFS": "host" } }),
            cel::HOST_PATHS_ABSOLUTE[0],
            "spec.hostPaths.rootFS",
        ),
        (
            json!({ "hostPaths": { "driverInstallDir": "run/nvidia" } }),
            cel::HOST_PATHS_ABSOLUTE[1],
            "spec.hostPaths.driverInstallDir",
        ),
        (
            json!({ "hostPaths": { "kubeletRootDir": "var/lib/kubelet" } }),
            cel::HOST_PATHS_ABSOLUTE[2],
            "spec.hostPaths.kubeletRootDir",
        ),
        (
            json!({ "toolkit": { "installDir": "nvidia" } }),
            cel::TOOLKIT_INSTALL_DIR_ABSOLUTE,
            "spec.toolkit.installDir",
        ),
        (
            json!({ "devicePlugin": { "mps": { "root": "mps" } } }),
            cel::MPS_ROOT_ABSOLUTE,
            "spec.devicePlugin.mps.root",
        ),
        (
            json!({ "dcgmExporter": { "hpcJobMapping": { "directory": "jobs" } } }),
            cel::HPC_JOB_MAPPING_DIR_ABSOLUTE,
            "spec.dcgmExporter.hpcJobMapping.directory",
        ),
    ];
    for (patch, rule, path) in cases {
        assert_rejected(&patch, rule, path);
    }
}
