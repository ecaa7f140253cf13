//! The CEL rules evaluated locally: NVIDIA's (immutable `driverType` and `usePrecompiled`, no
//! `nodeSelector` on the default) and ours, each on an object that breaks it and on its nearest
//! good neighbour.

use gpu_operator_api::cel::CelRule;
use gpu_operator_api::nvidia_driver::cel;
use serde_json::{Value, json};

use super::cel_errors;
use super::facts::nvidia_sample;
use super::with_nvidia_defaults;

/// NVIDIA's sample (as stored) with `patch` merged into its spec (JSON merge patch: `null`
/// removes).
fn sample_with(patch: &Value) -> Value {
    fn merge(target: &mut Value, patch: &Value) {
        match (target, patch) {
            (Value::Object(target), Value::Object(patch)) => {
                for (key, value) in patch {
                    if value.is_null() {
                        target.remove(key);
                    } else {
                        merge(target.entry(key.clone()).or_insert(json!({})), value);
                    }
                }
            }
            (target, patch) => *target = patch.clone(),
        }
    }
    let mut object = with_nvidia_defaults(&nvidia_sample());
    merge(&mut object["spec"], patch);
    object
}

fn assert_ok(patch: &Value) {
    assert_eq!(
        cel_errors(&sample_with(patch), None),
        Vec::new(),
        "should pass: {patch}"
    );
}

fn assert_rejected(patch: &Value, rule: CelRule, field: &str) {
    let errors = cel_errors(&sample_with(patch), None);
    assert!(
        errors.iter().any(|(p, m)| m == rule.message && p == field),
        "{patch} should fail at {field} with {:?}; got {errors:?}",
        rule.message
    );
}

/// The errors of updating the sample patched with `before` to the sample patched with `after`.
fn update_errors(before: &Value, after: &Value) -> Vec<(String, String)> {
    cel_errors(&sample_with(after), Some(&sample_with(before)))
}

fn assert_update_rejected(before: &Value, after: &Value, rule: CelRule, field: &str) {
    let errors = update_errors(before, after);
    assert!(
        errors.iter().any(|(p, m)| m == rule.message && p == field),
        "{before} -> {after} should fail at {field} with {:?}; got {errors:?}",
        rule.message
    );
}

#[test]
fn driver_type_cannot_change() {
    for (from, to) in [
        ("gpu", "vgpu"),
        ("vgpu", "vgpu-host-manager"),
        ("vgpu-host-manager", "gpu"),
    ] {
        assert_update_rejected(
            &json!({ "driverType": from }),
            &json!({ "driverType": to }),
            cel::DRIVER_TYPE_IMMUTABLE,
            "spec.driverType",
        );
    }
    let same = json!({ "driverType": "vgpu" });
    assert_eq!(update_errors(&same, &same), Vec::new());
    // Other fields still change freely.
    assert_eq!(
        update_errors(&json!({}), &json!({ "version": "580.105.08" })),
        Vec::new()
    );
}

#[test]
fn use_precompiled_cannot_change_set_or_unset() {
    assert_update_rejected(
        &json!({ "usePrecompiled": false }),
        &json!({ "usePrecompiled": true }),
        cel::USE_PRECOMPILED_IMMUTABLE,
        "spec.usePrecompiled",
    );
    assert_update_rejected(
        &json!({ "usePrecompiled": true }),
        &json!({ "usePrecompiled": false }),
        cel::USE_PRECOMPILED_IMMUTABLE,
        "spec.usePrecompiled",
    );
    // NVIDIA's rule on the field does not run when the field appears or disappears; ours does.
    assert_update_rejected(
        &json!({ "usePrecompiled": null }),
        &json!({ "usePrecompiled": true }),
        cel::USE_PRECOMPILED_NOT_ADDED_OR_REMOVED,
        "spec.usePrecompiled",
    );
    assert_update_rejected(
        &json!({ "usePrecompiled": true }),
        &json!({ "usePrecompiled": null }),
        cel::USE_PRECOMPILED_NOT_ADDED_OR_REMOVED,
        "spec.usePrecompiled",
    );
    // Unset and false mean the same build.
    for (from, to) in [(json!(null), json!(false)), (json!(false), json!(null))] {
        assert_eq!(
            update_errors(
                &json!({ "usePrecompiled": from }),
                &json!({ "usePrecompiled": to })
            ),
            Vec::new()
        );
    }
    // Creating with either value is fine.
    assert_ok(&json!({ "usePrecompiled": true, "version": "595" }));
}

#[test]
fn the_default_driver_has_no_node_selector() {
    let rule = cel::DEFAULT_HAS_NO_NODE_SELECTOR;
    assert_rejected(
        &json!({ "default": true, "nodeSelector": { "pool": "a" } }),
        rule,
        "spec.nodeSelector",
    );
    assert_ok(&json!({ "default": true, "nodeSelector": {} }));
    assert_ok(&json!({ "default": true, "nodeSelector": null }));
    assert_ok(&json!({ "default": false, "nodeSelector": { "pool": "a" } }));
}

#[test]
fn the_driver_image_must_resolve() {
    // NVIDIA's sample: repository, image and version.
    assert_ok(&json!({}));
    // `image` alone, with a tag or a digest.
    for image in [
        "nvcr.io/nvidia/driver:595.91.07",
        "registry.local:5000/nvidia/driver:595.91.07",
        "registry.local/driver@sha256:0123abcd",
    ] {
        assert_ok(&json!({ "repository": null, "version": null, "image": image }));
    }
    // A digest as the version.
    assert_ok(&json!({ "version": "sha256:0123abcd" }));
    let complete = cel::DRIVER_IMAGE_COMPLETE;
    assert_rejected(&json!({ "version": null }), complete, "spec");
    assert_rejected(&json!({ "repository": null }), complete, "spec");
    assert_rejected(&json!({ "repository": "" }), complete, "spec");
    assert_rejected(&json!({ "image": "" }), complete, "spec");
    // No version anywhere: NVIDIA's operator would pull `<image>-<os>` without a tag.
    let version = cel::DRIVER_IMAGE_HAS_VERSION;
    for image in ["nvcr.io/nvidia/driver", "registry.local:5000/nvidia/driver"] {
        assert_rejected(
            &json!({ "repository": null, "version": null, "image": image }),
            version,
            "spec.version",
        );
    }
}

#[test]
fn precompiled_drivers_take_a_branch_and_no_gds_or_gdrcopy() {
    assert_rejected(
        &json!({ "usePrecompiled": true, "version": "sha256:0123abcd" }),
        cel::PRECOMPILED_NOT_A_DIGEST,
        "spec.version",
    );
    assert_rejected(
        &json!({ "usePrecompiled": true, "repository": null, "version": null,
                 "image": "registry.local/driver@sha256:0123abcd" }),
        cel::PRECOMPILED_NOT_A_DIGEST,
        "spec.version",
    );
    assert_ok(&json!({ "usePrecompiled": false, "version": "sha256:0123abcd" }));
    for addon in ["gds", "gdrcopy"] {
        assert_rejected(
            &json!({ "usePrecompiled": true, "version": "595", addon: { "enabled": true } }),
            cel::PRECOMPILED_WITHOUT_GDS_OR_GDRCOPY,
            "spec.usePrecompiled",
        );
        assert_ok(
            &json!({ "usePrecompiled": true, "version": "595", addon: { "enabled": false } }),
        );
    }
}

#[test]
fn node_selectors_leave_the_owner_label_to_the_operator() {
    assert_rejected(
        &json!({ "nodeSelector": { "nvidia.com/gpu-operator.driver.owner": "h100" } }),
        cel::NODE_SELECTOR_WITHOUT_OWNER_LABEL,
        "spec.nodeSelector",
    );
    assert_ok(&json!({ "nodeSelector": { "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3" } }));
}

#[test]
fn the_manager_image_is_complete_or_left_to_the_operator() {
    assert_ok(&json!({ "manager": {} }));
    assert_ok(&json!({ "manager": { "image": "registry.local/k8s-driver-manager:v0.9.0" } }));
    assert_ok(&json!({ "manager": {
        "repository": "nvcr.io/nvidia/cloud-native", "image": "k8s-driver-manager", "version": "v0.9.0" } }));
    assert_rejected(
        &json!({ "manager": { "version": "v0.9.0" } }),
        cel::MANAGER_IMAGE_COMPLETE,
        "spec.manager",
    );
}

#[test]
fn sections_shared_with_the_cluster_policy_keep_their_rules() {
    // GDS and GDRCopy bring the ClusterPolicy's image rule; the upgrade policy its format rule,
    // with a message naming this CR's field.
    assert_rejected(
        &json!({ "gds": { "enabled": true, "version": "2.20.5" } }),
        gpu_operator_api::cel::IMAGE_COMPLETE_WHEN_ENABLED,
        "spec.gds",
    );
    assert_rejected(
        &json!({ "upgradePolicy": { "maxUnavailable": "one" } }),
        cel::UPGRADE_MAX_UNAVAILABLE_FORMAT,
        "spec.upgradePolicy.maxUnavailable",
    );
    assert_ok(&json!({ "upgradePolicy": { "maxUnavailable": 2 } }));
}
