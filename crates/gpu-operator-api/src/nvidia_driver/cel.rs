//! The CEL rules (`x-kubernetes-validations`) of the NVIDIADriver schema: NVIDIA's three (the
//! default NVIDIADriver has no `nodeSelector`; `driverType` and `usePrecompiled` cannot change),
//! and ours for the mistakes NVIDIA's operator finds only while reconciling (an image that cannot
//! resolve, precompiled drivers with GDS or GDRCopy, the operator's own label in a selector).
//!
//! The sections shared with the ClusterPolicy bring their own rules (`gds` and `gdrcopy` images,
//! `upgradePolicy.maxUnavailable`; see `crate::cel`). Each message names the field and the fix;
//! tests match on them, so change them with care.

use schemars::Schema;
use serde_json::{Value, json};

use crate::cel::{CelRule, image_complete, incomplete_image};
use crate::schema::add_rules;

/// NVIDIA's rule: the default NVIDIADriver serves the nodes no other one selects, so it selects
/// none itself.
pub const DEFAULT_HAS_NO_NODE_SELECTOR: CelRule = CelRule {
    rule: "!has(self.default) || !self.default || !has(self.nodeSelector) || size(self.nodeSelector) == 0",
    message: "the default NVIDIADriver (default: true) serves every GPU node that no other NVIDIADriver selects, so it cannot have a nodeSelector: remove nodeSelector, or set default: false",
    field_path: Some(".nodeSelector"),
};

/// NVIDIA's rule, on `driverType`: it cannot change.
pub const DRIVER_TYPE_IMMUTABLE: CelRule = CelRule {
    rule: "self == oldSelf",
    message: "driverType cannot change on an existing NVIDIADriver: create a new NVIDIADriver with the new driverType for these nodes, then delete this one",
    field_path: None,
};

/// NVIDIA's rule, on `usePrecompiled`: it cannot change once set.
pub const USE_PRECOMPILED_IMMUTABLE: CelRule = CelRule {
    rule: "self == oldSelf",
    message: "usePrecompiled cannot change on an existing NVIDIADriver: create a new NVIDIADriver with the new setting for these nodes, then delete this one",
    field_path: None,
};

/// Ours: NVIDIA's rule on the field itself does not run when the field is added or removed, so
/// unset (false) to true, and back, would switch the build all the same.
pub const USE_PRECOMPILED_NOT_ADDED_OR_REMOVED: CelRule = CelRule {
    rule: "(has(self.usePrecompiled) && has(oldSelf.usePrecompiled)) || (has(self.usePrecompiled) && self.usePrecompiled) == (has(oldSelf.usePrecompiled) && oldSelf.usePrecompiled)",
    message: "usePrecompiled cannot change on an existing NVIDIADriver (unset counts as false): create a new NVIDIADriver with the new setting for these nodes, then delete this one",
    field_path: Some(".usePrecompiled"),
};

/// Ours: `repository` and `version` come together, and with them a non-empty `image`.
pub const DRIVER_IMAGE_COMPLETE: CelRule = CelRule {
    rule: "(has(self.repository) && size(self.repository) > 0) == (has(self.version) && size(self.version) > 0) && (!has(self.version) || size(self.version) == 0 || (has(self.image) && size(self.image) > 0))",
    message: "incomplete driver image: set repository (such as nvcr.io/nvidia), image (such as driver) and version (such as 595.91.07) together, or set image alone to a full reference with a tag or digest",
    field_path: None,
};

/// Ours: without `version`, `image` is used as the whole reference, so it needs a tag or digest
/// (NVIDIA's operator would append the OS to a tagless name and pull an image that does not
/// exist).
pub const DRIVER_IMAGE_HAS_VERSION: CelRule = CelRule {
    rule: "(has(self.version) && size(self.version) > 0) || (has(self.image) && (self.image.contains('@') || self.image.lastIndexOf(':') > self.image.lastIndexOf('/')))",
    message: "the driver image has no version: set version (such as 595.91.07, or a branch such as 595 with usePrecompiled) and repository, or set image to a full reference with a tag or digest such as nvcr.io/nvidia/driver:595.91.07",
    field_path: Some(".version"),
};

/// Ours: precompiled images are picked by tag (driver branch, kernel, OS), never by digest.
pub const PRECOMPILED_NOT_A_DIGEST: CelRule = CelRule {
    rule: "!has(self.usePrecompiled) || !self.usePrecompiled || !((has(self.version) && self.version.startsWith('sha256:')) || (has(self.image) && self.image.contains('@')))",
    message: "usePrecompiled: true picks one image per kernel by its tag, so the driver image cannot be a digest: set version to a driver branch such as 595, or set usePrecompiled: false",
    field_path: Some(".version"),
};

/// Ours: GDS and GDRCopy build their modules against a driver compiled on the node.
pub const PRECOMPILED_WITHOUT_GDS_OR_GDRCOPY: CelRule = CelRule {
    rule: "!has(self.usePrecompiled) || !self.usePrecompiled || ((!has(self.gds) || !has(self.gds.enabled) || !self.gds.enabled) && (!has(self.gdrcopy) || !has(self.gdrcopy.enabled) || !self.gdrcopy.enabled))",
    message: "GPUDirect Storage (gds) and GDRCopy (gdrcopy) are not supported with precompiled drivers: set gds.enabled and gdrcopy.enabled to false, or run them from an NVIDIADriver with usePrecompiled: false",
    field_path: Some(".usePrecompiled"),
};

/// Ours: the operator writes this label on each node to name its NVIDIADriver; selecting on it
/// would chase the operator's own writes.
pub const NODE_SELECTOR_WITHOUT_OWNER_LABEL: CelRule = CelRule {
    rule: "!has(self.nodeSelector) || !('nvidia.com/gpu-operator.driver.owner' in self.nodeSelector)",
    message: "nodeSelector cannot use nvidia.com/gpu-operator.driver.owner, the label the operator sets to name each node's NVIDIADriver: select the nodes by their own labels (such as nvidia.com/gpu.product) instead",
    field_path: Some(".nodeSelector"),
};

/// Ours: `manager`'s image, as NVIDIA's operator resolves it: `image` alone, or all three of
/// `repository`, `image` and `version`, or none (the operator's default).
pub const MANAGER_IMAGE_COMPLETE: CelRule = CelRule {
    rule: concat!(
        "!has(self.manager) || (",
        image_complete!("self.manager"),
        ")"
    ),
    message: incomplete_image!(" (in manager)"),
    field_path: Some(".manager"),
};

/// The ClusterPolicy's `upgradePolicy.maxUnavailable` rule, with a message naming this CR's
/// field.
pub const UPGRADE_MAX_UNAVAILABLE_FORMAT: CelRule = CelRule {
    rule: crate::cel::UPGRADE_MAX_UNAVAILABLE_FORMAT.rule,
    message: "upgradePolicy.maxUnavailable must be a number of nodes such as 1, or a percentage of this NVIDIADriver's nodes from 0% to 100% such as \"25%\"",
    field_path: Some(".maxUnavailable"),
};

/// Every rule of this schema's own, for tests and documentation.
#[must_use]
pub fn all_rules() -> Vec<CelRule> {
    vec![
        DEFAULT_HAS_NO_NODE_SELECTOR,
        DRIVER_TYPE_IMMUTABLE,
        USE_PRECOMPILED_IMMUTABLE,
        USE_PRECOMPILED_NOT_ADDED_OR_REMOVED,
        DRIVER_IMAGE_COMPLETE,
        DRIVER_IMAGE_HAS_VERSION,
        PRECOMPILED_NOT_A_DIGEST,
        PRECOMPILED_WITHOUT_GDS_OR_GDRCOPY,
        NODE_SELECTOR_WITHOUT_OWNER_LABEL,
        MANAGER_IMAGE_COMPLETE,
        UPGRADE_MAX_UNAVAILABLE_FORMAT,
    ]
}

/// The spec's transform: NVIDIA's required fields and defaults that the Rust types cannot say,
/// the rules above, then the shared tidying.
pub(crate) fn spec(schema: &mut Schema) {
    add_rules(
        schema,
        &[
            DEFAULT_HAS_NO_NODE_SELECTOR,
            USE_PRECOMPILED_NOT_ADDED_OR_REMOVED,
            DRIVER_IMAGE_COMPLETE,
            DRIVER_IMAGE_HAS_VERSION,
            PRECOMPILED_NOT_A_DIGEST,
            PRECOMPILED_WITHOUT_GDS_OR_GDRCOPY,
            NODE_SELECTOR_WITHOUT_OWNER_LABEL,
            MANAGER_IMAGE_COMPLETE,
        ],
    );
    if let Some(object) = schema.as_object_mut() {
        object.insert("required".into(), json!(["default", "driverType", "image"]));
        if let Some(Value::Object(properties)) = object.get_mut("properties") {
            adjust_properties(properties);
        }
    }
    crate::schema::tidy(schema);
}

fn adjust_properties(properties: &mut serde_json::Map<String, Value>) {
    for (field, rule) in [
        ("driverType", DRIVER_TYPE_IMMUTABLE),
        ("usePrecompiled", USE_PRECOMPILED_IMMUTABLE),
    ] {
        if let Some(Value::Object(property)) = properties.get_mut(field)
            && let Value::Array(rules) = property
                .entry("x-kubernetes-validations")
                .or_insert_with(|| Value::Array(Vec::new()))
        {
            rules.push(rule.to_json());
        }
    }
    // The driver's image reads differently from a component's (its default, no version
    // default, the OS appended), and NVIDIA's schema has no pattern on it.
    if let Some(Value::Object(image)) = properties.get_mut("image") {
        image.insert("default".into(), json!(super::DEFAULT_IMAGE));
        image.remove("pattern");
        image.insert(
            "description".into(),
            json!("Image name, such as `driver`, with `repository` and `version`; alone, a full image reference with a tag or digest, such as `nvcr.io/nvidia/driver:595.91.07`. Defaults to `nvcr.io/nvidia/driver`."),
        );
    }
    if let Some(Value::Object(version)) = properties.get_mut("version") {
        version.insert(
            "description".into(),
            json!("Driver version, such as `595.91.07` (with `usePrecompiled`, a driver branch such as `595`), or a digest starting with `sha256:`. The node's OS, and with `usePrecompiled` its kernel version, are appended to the tag. Requires `repository`."),
        );
    }
    // NVIDIA's schema merges these node-affinity objects whole under server-side apply, as
    // Kubernetes' own types mark them; k8s-openapi's schemas leave the marker out.
    if let Some(affinity) = properties.get_mut("nodeAffinity") {
        for path in [
            "/properties/requiredDuringSchedulingIgnoredDuringExecution",
            "/properties/requiredDuringSchedulingIgnoredDuringExecution/properties/nodeSelectorTerms/items",
            "/properties/preferredDuringSchedulingIgnoredDuringExecution/items/properties/preference",
        ] {
            if let Some(Value::Object(object)) = affinity.pointer_mut(path) {
                object.insert("x-kubernetes-map-type".into(), json!("atomic"));
            }
        }
    }
    let Some(Value::Object(upgrade)) = properties.get_mut("upgradePolicy") else {
        return;
    };
    upgrade.insert(
        "x-kubernetes-validations".into(),
        json!([UPGRADE_MAX_UNAVAILABLE_FORMAT.to_json()]),
    );
    // NVIDIADriver's upgrade policy is on unless switched off (the ClusterPolicy's is off).
    if let Some(Value::Object(auto)) = upgrade
        .get_mut("properties")
        .and_then(|p| p.get_mut("autoUpgrade"))
    {
        auto.insert("default".into(), json!(true));
        auto.insert(
            "description".into(),
            json!("Let the operator drive the driver upgrades of this NVIDIADriver's nodes, node by node. Defaults to true; when false, driver pods are replaced only when deleted."),
        );
    }
}
