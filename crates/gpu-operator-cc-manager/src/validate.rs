//! Checks the ClusterPolicy for the confidential-computing manager and resolves its image
//! (`ccManager`, else `CC_MANAGER_IMAGE`) and its default CC mode (`ccManager.defaultMode`, set as
//! `DEFAULT_CC_MODE` only when given, as NVIDIA does: the manager then leaves nodes without a
//! `nvidia.com/cc.mode` label as they are). Pure.

use gpu_operator_api::{ClusterPolicySpec, spec::CcMode};
use gpu_operator_core::{
    Error,
    build::{component::Component, image, shared::Shared},
    contract::Cluster,
};

/// The operator's fallback variable of the CC manager image.
pub const IMAGE_ENV: &str = "CC_MANAGER_IMAGE";

/// What rendering the CC manager needs.
#[derive(Clone, Debug)]
pub struct Input {
    /// The CC manager image.
    pub image: String,
    /// `ccManager.defaultMode` as the manager reads it (`on`, `off`, `devtools`), if set.
    pub default_mode: Option<&'static str>,
    /// The operator namespace (the bindings' subject).
    pub namespace: String,
    /// `spec.ccManager`'s container settings.
    pub component: Component,
    /// The settings every operand pod shares.
    pub shared: Shared,
}

/// `Ok(None)` unless sandbox workloads are on in `kata` mode and `ccManager.enabled` is true
/// (NVIDIA's default is false); an image that cannot be resolved is an error naming the section.
pub fn validate(spec: &ClusterPolicySpec, cluster: &Cluster<'_>) -> Result<Option<Input>, Error> {
    let Some(section) = spec
        .cc_manager
        .as_ref()
        .filter(|_| spec.cc_manager_deployed())
    else {
        return Ok(None);
    };
    let image = image::resolve(
        "ccManager",
        &section.image,
        IMAGE_ENV,
        (cluster.image_env)(IMAGE_ENV).as_deref(),
    )?;
    Ok(Some(Input {
        image,
        default_mode: section.default_mode.map(|mode| match mode {
            CcMode::On => "on",
            CcMode::Off => "off",
            CcMode::Devtools => "devtools",
        }),
        namespace: cluster.namespace.to_owned(),
        component: Component::of(&section.image, &section.container, section.host_network),
        shared: Shared::of(spec),
    }))
}

#[cfg(test)]
mod tests {
    use gpu_operator_api::spec::{CcManagerSpec, SandboxMode, SandboxWorkloadsSpec};
    use gpu_operator_core::fixtures;
    use serde_json::json;

    use super::*;

    /// `spec` with sandbox workloads `sandbox` in `mode` and section `ccManager`.
    fn spec(
        sandbox: Option<bool>,
        mode: Option<SandboxMode>,
        section: serde_json::Value,
    ) -> ClusterPolicySpec {
        ClusterPolicySpec {
            sandbox_workloads: Some(SandboxWorkloadsSpec {
                enabled: sandbox,
                mode,
                ..SandboxWorkloadsSpec::default()
            }),
            cc_manager: Some(serde_json::from_value::<CcManagerSpec>(section).unwrap()),
            ..ClusterPolicySpec::default()
        }
    }

    fn check(spec: &ClusterPolicySpec) -> Result<Option<Input>, Error> {
        fixtures::with_cluster(&fixtures::image_env, |cluster| validate(spec, cluster))
    }

    #[test]
    fn deployed_only_with_kata_sandbox_workloads_and_the_section_enabled() {
        // NVIDIA: `sandboxEnabled && ccManager.IsEnabled() && mode == kata`; an unset `enabled`
        // is false, an unset mode is kubevirt.
        let on = json!({"enabled": true});
        let kata = Some(SandboxMode::Kata);
        for (sandbox, mode, section, deployed) in [
            (Some(true), kata, on.clone(), true),
            (Some(true), Some(SandboxMode::Kubevirt), on.clone(), false),
            (Some(true), None, on.clone(), false),
            (Some(true), kata, json!({}), false),
            (Some(true), kata, json!({"enabled": false}), false),
            (Some(false), kata, on.clone(), false),
            (None, kata, on.clone(), false),
        ] {
            let input = check(&spec(sandbox, mode, section.clone())).unwrap();
            assert_eq!(input.is_some(), deployed, "{sandbox:?} {mode:?} {section}");
        }
        assert!(check(&ClusterPolicySpec::default()).unwrap().is_none());
    }

    #[test]
    fn the_image_and_the_default_mode() {
        let kata = Some(SandboxMode::Kata);
        let input = check(&spec(Some(true), kata, json!({"enabled": true})))
            .unwrap()
            .unwrap();
        assert_eq!(input.image, "registry.example.com/cc-manager:v1");
        assert_eq!(input.default_mode, None);
        assert_eq!(input.namespace, "gpu-operator");
        let section = json!({
            "enabled": true, "defaultMode": "devtools",
            "repository": "nvcr.io/nvidia/cloud-native", "image": "k8s-cc-manager",
            "version": "v0.4.3", "imagePullPolicy": "Always", "hostNetwork": true
        });
        let input = check(&spec(Some(true), kata, section)).unwrap().unwrap();
        assert_eq!(
            input.image,
            "nvcr.io/nvidia/cloud-native/k8s-cc-manager:v0.4.3"
        );
        assert_eq!(input.default_mode, Some("devtools"));
        assert_eq!(input.component.pull_policy, "Always");
        assert!(input.component.host_network);
    }

    #[test]
    fn an_image_nobody_names_is_an_error_naming_the_section_and_the_fix() {
        let nothing = |_: &str| None;
        let enabled = spec(
            Some(true),
            Some(SandboxMode::Kata),
            json!({"enabled": true}),
        );
        let error = fixtures::with_cluster(&nothing, |cluster| validate(&enabled, cluster))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("spec.ccManager.repository") && error.contains(IMAGE_ENV),
            "{error}"
        );
    }
}
