//! The CEL rules (`x-kubernetes-validations`) of the ClusterPolicy schema: the cross-field
//! mistakes NVIDIA's operator only finds while reconciling, rejected at `kubectl apply` instead.
//!
//! Each rule is a [`CelRule`] constant, attached to its object schema by a transform function
//! below (`#[schemars(transform = ...)]` on the type). The messages name the field and the fix;
//! tests match on them, so change them with care.

use schemars::Schema;
use serde_json::{Value, json};

use crate::schema::add_rules;

/// One CEL validation rule of the CRD schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CelRule {
    /// The CEL expression, evaluated with `self` bound to the object that carries the rule.
    pub rule: &'static str,
    /// The message the API server returns when the rule is false.
    pub message: &'static str,
    /// Where the API server reports the error, relative to the object (`.field`); `None` reports
    /// it on the object itself.
    pub field_path: Option<&'static str>,
}

impl CelRule {
    /// The rule as an entry of `x-kubernetes-validations`.
    #[must_use]
    pub fn to_json(&self) -> Value {
        let mut value = json!({ "rule": self.rule, "message": self.message });
        if let (Some(path), Value::Object(map)) = (self.field_path, &mut value) {
            map.insert("fieldPath".into(), Value::String(path.into()));
        }
        value
    }
}

/// The CEL condition "the image fields of `$at` are complete": either none of `repository` and
/// `version` is set (`image` alone is a full reference, or nothing is set and the operator's
/// default applies), or all of `repository`, `image` and `version` are.
macro_rules! image_complete {
    ($at:literal) => {
        concat!(
            "((!has(",
            $at,
            ".repository) || size(",
            $at,
            ".repository) == 0) && (!has(",
            $at,
            ".version) || size(",
            $at,
            ".version) == 0)) || (has(",
            $at,
            ".repository) && size(",
            $at,
            ".repository) > 0 && has(",
            $at,
            ".image) && size(",
            $at,
            ".image) > 0 && has(",
            $at,
            ".version) && size(",
            $at,
            ".version) > 0)"
        )
    };
}

pub(crate) use image_complete;

/// The shared first sentence of the image rules' messages.
macro_rules! incomplete_image {
    ($tail:literal) => {
        concat!(
            "incomplete image: set either `image` alone to a full image reference (such as nvcr.io/nvidia/k8s-device-plugin:v0.17.0), or all three of `repository`, `image` and `version`; leave all three unset to use the operator's default image",
            $tail
        )
    };
}

pub(crate) use incomplete_image;

/// The validator's image (it always runs): either `image` alone, or `repository`, `image` and
/// `version` together.
pub const IMAGE_COMPLETE: CelRule = CelRule {
    rule: image_complete!("self"),
    message: incomplete_image!(""),
    field_path: None,
};

/// The image of a section the operator deploys unless `enabled: false` (driver, toolkit, device
/// plugin, GFD, DCGM, DCGM exporter, MIG manager). NVIDIA's operator resolves an image only for
/// the sections it deploys, so a disabled section may keep a partial image.
pub const IMAGE_COMPLETE_UNLESS_DISABLED: CelRule = CelRule {
    rule: concat!(
        "(has(self.enabled) && !self.enabled) || (",
        image_complete!("self"),
        ")"
    ),
    message: incomplete_image!(
        " (checked because the section is enabled; it is enabled unless `enabled: false`)"
    ),
    field_path: None,
};

/// The image of a section the operator deploys only with `enabled: true` (GDS, GDRCopy, node
/// status exporter, the sandbox and vGPU components, CC manager).
pub const IMAGE_COMPLETE_WHEN_ENABLED: CelRule = CelRule {
    rule: concat!(
        "!has(self.enabled) || !self.enabled || (",
        image_complete!("self"),
        ")"
    ),
    message: incomplete_image!(" (checked because the section has `enabled: true`)"),
    field_path: None,
};

/// `driver.manager`'s image, checked while the driver is deployed (unless `enabled: false`).
pub const DRIVER_MANAGER_IMAGE_COMPLETE: CelRule = CelRule {
    rule: concat!(
        "(has(self.enabled) && !self.enabled) || !has(self.manager) || (",
        image_complete!("self.manager"),
        ")"
    ),
    message: incomplete_image!(" (checked because the driver is enabled)"),
    field_path: Some(".manager"),
};

/// `vgpuManager.driverManager` and `vfioManager.driverManager`: checked with `enabled: true`.
pub const SANDBOX_DRIVER_MANAGER_IMAGE_COMPLETE: CelRule = CelRule {
    rule: concat!(
        "!has(self.enabled) || !self.enabled || !has(self.driverManager) || (",
        image_complete!("self.driverManager"),
        ")"
    ),
    message: incomplete_image!(" (checked because the section has `enabled: true`)"),
    field_path: Some(".driverManager"),
};

/// `cdi.nriPluginEnabled` needs CDI and the container toolkit.
pub const NRI_NEEDS_CDI_AND_TOOLKIT: CelRule = CelRule {
    rule: "!has(self.cdi) || !has(self.cdi.nriPluginEnabled) || !self.cdi.nriPluginEnabled || ((!has(self.cdi.enabled) || self.cdi.enabled) && (!has(self.toolkit.enabled) || self.toolkit.enabled))",
    message: "cdi.nriPluginEnabled: true needs CDI and the container toolkit: set cdi.enabled: true and toolkit.enabled: true (both default to true), or set cdi.nriPluginEnabled: false",
    field_path: Some(".cdi.nriPluginEnabled"),
};

/// `daemonsets.rollingUpdate.maxUnavailable` is a node count or a percentage.
pub const MAX_UNAVAILABLE_FORMAT: CelRule = CelRule {
    rule: "!has(self.maxUnavailable) || size(self.maxUnavailable) == 0 || self.maxUnavailable.matches('^([0-9]+|([0-9]|[1-9][0-9]|100)%)$')",
    message: "daemonsets.rollingUpdate.maxUnavailable must be a whole number of nodes such as \"1\", or a percentage of nodes from 0% to 100% such as \"10%\"",
    field_path: Some(".maxUnavailable"),
};

/// `daemonsets.rollingUpdate.maxUnavailable` of zero would make every operand DaemonSet invalid.
pub const MAX_UNAVAILABLE_NOT_ZERO: CelRule = CelRule {
    rule: "!has(self.maxUnavailable) || !self.maxUnavailable.matches('^0+%?$')",
    message: "daemonsets.rollingUpdate.maxUnavailable must be at least \"1\" or \"1%\": a DaemonSet cannot roll out with 0 unavailable nodes",
    field_path: Some(".maxUnavailable"),
};

/// `driver.upgradePolicy.maxUnavailable` is a node count or a percentage.
pub const UPGRADE_MAX_UNAVAILABLE_FORMAT: CelRule = CelRule {
    rule: "!has(self.maxUnavailable) || string(self.maxUnavailable).matches('^([0-9]+|([0-9]|[1-9][0-9]|100)%)$')",
    message: "driver.upgradePolicy.maxUnavailable must be a number of nodes such as 1, or a percentage of the GPU nodes from 0% to 100% such as \"25%\"",
    field_path: Some(".maxUnavailable"),
};

/// `devicePlugin.config.default` picks a key of the ConfigMap named by `devicePlugin.config.name`.
pub const DEVICE_PLUGIN_DEFAULT_NEEDS_NAME: CelRule = CelRule {
    rule: "!has(self.default) || size(self.default) == 0 || (has(self.name) && size(self.name) > 0)",
    message: "devicePlugin.config.default picks a configuration inside the ConfigMap named by devicePlugin.config.name: set devicePlugin.config.name to that ConfigMap (in the operator's namespace), or remove devicePlugin.config.default",
    field_path: Some(".default"),
};

/// `migManager.config.default` is written as the value of the `nvidia.com/mig.config` node label.
pub const MIG_DEFAULT_CONFIG_NAME: CelRule = CelRule {
    rule: "!has(self.default) || size(self.default) == 0 || self.default.matches('^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$')",
    message: "migManager.config.default must be a MIG configuration name that is also a valid node label value (letters, digits, '-', '_' and '.', starting and ending with a letter or digit, at most 63 characters), such as all-disabled or all-1g.10gb",
    field_path: Some(".default"),
};

/// `operator.runtimeClass` names the RuntimeClass object the operator creates.
pub const RUNTIME_CLASS_NAME: CelRule = CelRule {
    rule: "!has(self.runtimeClass) || size(self.runtimeClass) == 0 || self.runtimeClass.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",
    message: "operator.runtimeClass must be a valid RuntimeClass name (lower-case letters, digits, '-' and '.', starting and ending with a letter or digit), such as nvidia",
    field_path: Some(".runtimeClass"),
};

/// Builds the "absolute path" rule of one string field.
macro_rules! absolute_path_rule {
    ($field:literal, $shown:literal) => {
        CelRule {
            rule: concat!(
                "!has(self.",
                $field,
                ") || size(self.",
                $field,
                ") == 0 || self.",
                $field,
                ".startsWith('/')"
            ),
            message: concat!(
                $shown,
                " must be an absolute path on the node, starting with '/'"
            ),
            field_path: Some(concat!(".", $field)),
        }
    };
}

/// Host paths: relative paths would make every operand's hostPath volume invalid.
pub const HOST_PATHS_ABSOLUTE: [CelRule; 3] = [
    absolute_path_rule!("rootFS", "hostPaths.rootFS"),
    absolute_path_rule!("driverInstallDir", "hostPaths.driverInstallDir"),
    absolute_path_rule!("kubeletRootDir", "hostPaths.kubeletRootDir"),
];

/// `toolkit.installDir` is a host directory.
pub const TOOLKIT_INSTALL_DIR_ABSOLUTE: CelRule =
    absolute_path_rule!("installDir", "toolkit.installDir");

/// `devicePlugin.mps.root` is a host directory.
pub const MPS_ROOT_ABSOLUTE: CelRule = absolute_path_rule!("root", "devicePlugin.mps.root");

/// `dcgmExporter.hpcJobMapping.directory` is a host directory.
pub const HPC_JOB_MAPPING_DIR_ABSOLUTE: CelRule =
    absolute_path_rule!("directory", "dcgmExporter.hpcJobMapping.directory");

/// Every rule of the schema, for tests and documentation.
#[must_use]
pub fn all_rules() -> Vec<CelRule> {
    let mut rules = vec![
        IMAGE_COMPLETE,
        IMAGE_COMPLETE_UNLESS_DISABLED,
        IMAGE_COMPLETE_WHEN_ENABLED,
        DRIVER_MANAGER_IMAGE_COMPLETE,
        SANDBOX_DRIVER_MANAGER_IMAGE_COMPLETE,
        NRI_NEEDS_CDI_AND_TOOLKIT,
        MAX_UNAVAILABLE_FORMAT,
        MAX_UNAVAILABLE_NOT_ZERO,
        UPGRADE_MAX_UNAVAILABLE_FORMAT,
        DEVICE_PLUGIN_DEFAULT_NEEDS_NAME,
        MIG_DEFAULT_CONFIG_NAME,
        RUNTIME_CLASS_NAME,
        TOOLKIT_INSTALL_DIR_ABSOLUTE,
        MPS_ROOT_ABSOLUTE,
        HPC_JOB_MAPPING_DIR_ABSOLUTE,
    ];
    rules.extend(HOST_PATHS_ABSOLUTE);
    rules
}

pub(crate) fn validator(schema: &mut Schema) {
    add_rules(schema, &[IMAGE_COMPLETE]);
}

pub(crate) fn enabled_by_default(schema: &mut Schema) {
    add_rules(schema, &[IMAGE_COMPLETE_UNLESS_DISABLED]);
}

pub(crate) fn disabled_by_default(schema: &mut Schema) {
    add_rules(schema, &[IMAGE_COMPLETE_WHEN_ENABLED]);
}

pub(crate) fn driver(schema: &mut Schema) {
    add_rules(
        schema,
        &[
            IMAGE_COMPLETE_UNLESS_DISABLED,
            DRIVER_MANAGER_IMAGE_COMPLETE,
        ],
    );
}

pub(crate) fn sandbox_driver(schema: &mut Schema) {
    add_rules(
        schema,
        &[
            IMAGE_COMPLETE_WHEN_ENABLED,
            SANDBOX_DRIVER_MANAGER_IMAGE_COMPLETE,
        ],
    );
}

pub(crate) fn cluster_policy_spec(schema: &mut Schema) {
    add_rules(schema, &[NRI_NEEDS_CDI_AND_TOOLKIT]);
    crate::schema::tidy(schema);
}

pub(crate) fn rolling_update(schema: &mut Schema) {
    add_rules(schema, &[MAX_UNAVAILABLE_FORMAT, MAX_UNAVAILABLE_NOT_ZERO]);
}

pub(crate) fn upgrade_policy(schema: &mut Schema) {
    add_rules(schema, &[UPGRADE_MAX_UNAVAILABLE_FORMAT]);
}

pub(crate) fn device_plugin_config(schema: &mut Schema) {
    add_rules(schema, &[DEVICE_PLUGIN_DEFAULT_NEEDS_NAME]);
}

pub(crate) fn mig_parted_config(schema: &mut Schema) {
    add_rules(schema, &[MIG_DEFAULT_CONFIG_NAME]);
}

pub(crate) fn operator(schema: &mut Schema) {
    add_rules(schema, &[RUNTIME_CLASS_NAME]);
}

pub(crate) fn host_paths(schema: &mut Schema) {
    add_rules(schema, &HOST_PATHS_ABSOLUTE);
}

pub(crate) fn toolkit(schema: &mut Schema) {
    add_rules(
        schema,
        &[IMAGE_COMPLETE_UNLESS_DISABLED, TOOLKIT_INSTALL_DIR_ABSOLUTE],
    );
}

pub(crate) fn mps(schema: &mut Schema) {
    add_rules(schema, &[MPS_ROOT_ABSOLUTE]);
}

pub(crate) fn hpc_job_mapping(schema: &mut Schema) {
    add_rules(schema, &[HPC_JOB_MAPPING_DIR_ABSOLUTE]);
}
