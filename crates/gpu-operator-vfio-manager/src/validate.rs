//! Checks the ClusterPolicy for the VFIO manager and resolves its two images: its own
//! (`vfioManager`, else `VFIO_MANAGER_IMAGE`) and its k8s-driver-manager init container's
//! (`vfioManager.driverManager`, else `DRIVER_MANAGER_IMAGE`). Pure.

use gpu_operator_api::{ClusterPolicySpec, spec::EnvVar};
use gpu_operator_core::{
    Error,
    build::{
        component::{Component, Pull},
        image,
        shared::Shared,
    },
    contract::Cluster,
};

/// The operator's fallback variable of the VFIO manager image.
pub const IMAGE_ENV: &str = "VFIO_MANAGER_IMAGE";
/// The operator's fallback variable of the driver manager image.
pub const MANAGER_IMAGE_ENV: &str = "DRIVER_MANAGER_IMAGE";

/// What rendering the VFIO manager needs.
#[derive(Clone, Debug)]
pub struct Input {
    /// The VFIO manager image.
    pub image: String,
    /// The k8s-driver-manager init container image.
    pub manager_image: String,
    /// `vfioManager.driverManager`'s pull policy (when set) and pull secrets.
    pub manager_pull: Pull,
    /// `vfioManager.driverManager.env`, which override the init container's variables by name.
    pub manager_env: Vec<EnvVar>,
    /// The operator namespace (the binding's subject).
    pub namespace: String,
    /// `spec.vfioManager`'s container settings.
    pub component: Component,
    /// The settings every operand pod shares.
    pub shared: Shared,
}

/// `Ok(None)` unless sandbox workloads and `vfioManager.enabled` are both on (both default to
/// false); an image that cannot be resolved is an error naming its section.
pub fn validate(spec: &ClusterPolicySpec, cluster: &Cluster<'_>) -> Result<Option<Input>, Error> {
    let Some(section) = spec
        .vfio_manager
        .as_ref()
        .filter(|_| spec.vfio_manager_enabled())
    else {
        return Ok(None);
    };
    let image = image::resolve(
        "vfioManager",
        &section.image,
        IMAGE_ENV,
        (cluster.image_env)(IMAGE_ENV).as_deref(),
    )?;
    let manager = section.driver_manager.clone().unwrap_or_default();
    let manager_image = image::resolve(
        "vfioManager.driverManager",
        &manager.image,
        MANAGER_IMAGE_ENV,
        (cluster.image_env)(MANAGER_IMAGE_ENV).as_deref(),
    )?;
    Ok(Some(Input {
        image,
        manager_image,
        manager_pull: Pull::of(&manager.image),
        manager_env: manager.env.unwrap_or_default(),
        namespace: cluster.namespace.to_owned(),
        component: Component::of(&section.image, &section.container, section.host_network),
        shared: Shared::of(spec),
    }))
}

#[cfg(test)]
mod tests {
    use gpu_operator_api::spec::{SandboxWorkloadsSpec, VfioManagerSpec};
    use gpu_operator_core::fixtures;
    use serde_json::json;

    use super::*;

    /// `spec` with sandbox workloads `sandbox` and section `vfioManager`.
    fn spec(sandbox: Option<bool>, section: serde_json::Value) -> ClusterPolicySpec {
        ClusterPolicySpec {
            sandbox_workloads: Some(SandboxWorkloadsSpec {
                enabled: sandbox,
                ..SandboxWorkloadsSpec::default()
            }),
            vfio_manager: Some(serde_json::from_value::<VfioManagerSpec>(section).unwrap()),
            ..ClusterPolicySpec::default()
        }
    }

    fn check(spec: &ClusterPolicySpec) -> Result<Option<Input>, Error> {
        fixtures::with_cluster(&fixtures::image_env, |cluster| validate(spec, cluster))
    }

    #[test]
    fn deployed_only_with_sandbox_workloads_and_the_section_enabled() {
        // NVIDIA: `sandboxEnabled && vfioManager.IsEnabled()`, and an unset `enabled` is false.
        let on = json!({"enabled": true});
        for (sandbox, section, deployed) in [
            (Some(true), on.clone(), true),
            (Some(true), json!({}), false),
            (Some(true), json!({"enabled": false}), false),
            (Some(false), on.clone(), false),
            (None, on.clone(), false),
        ] {
            let input = check(&spec(sandbox, section.clone())).unwrap();
            assert_eq!(input.is_some(), deployed, "{sandbox:?} {section}");
        }
        let mut no_section = spec(Some(true), on);
        no_section.vfio_manager = None;
        assert!(check(&no_section).unwrap().is_none());
        assert!(check(&ClusterPolicySpec::default()).unwrap().is_none());
    }

    #[test]
    fn both_images_fall_back_to_the_operators_variables() {
        let input = check(&spec(Some(true), json!({"enabled": true})))
            .unwrap()
            .unwrap();
        assert_eq!(input.image, "registry.example.com/vfio-manager:v1");
        assert_eq!(
            input.manager_image,
            "registry.example.com/driver-manager:v1"
        );
        assert_eq!(input.manager_pull, Pull::default());
        assert!(input.manager_env.is_empty());
        assert_eq!(input.namespace, "gpu-operator");
    }

    #[test]
    fn the_section_and_its_driver_manager_name_their_images_and_settings() {
        let section = json!({
            "enabled": true,
            "repository": "nvcr.io/nvidia/cloud-native", "image": "k8s-driver-manager",
            "version": "v0.12.0",
            "imagePullPolicy": "Always", "imagePullSecrets": ["vfio-secret"],
            "resources": {"limits": {"memory": "1Gi"}},
            "args": ["vfio-manage bind --all"],
            "env": [{"name": "A", "value": "1"}],
            "hostNetwork": true,
            "driverManager": {
                "repository": "registry.local", "image": "manager", "version": "sha256:abc",
                "imagePullPolicy": "Never", "imagePullSecrets": ["manager-secret"],
                "env": [{"name": "ENABLE_GPU_POD_EVICTION", "value": "true"}]
            }
        });
        let input = check(&spec(Some(true), section)).unwrap().unwrap();
        assert_eq!(
            input.image,
            "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.12.0"
        );
        assert_eq!(input.manager_image, "registry.local/manager@sha256:abc");
        assert_eq!(input.manager_pull.policy, Some("Never"));
        assert_eq!(input.manager_pull.secrets, ["manager-secret"]);
        assert_eq!(input.manager_env[0].name, "ENABLE_GPU_POD_EVICTION");
        assert_eq!(input.component.pull_policy, "Always");
        assert_eq!(input.component.pull_secrets, ["vfio-secret"]);
        assert!(input.component.resources.is_some());
        assert_eq!(input.component.args, ["vfio-manage bind --all"]);
        assert_eq!(input.component.user_env("A"), Some("1"));
        assert!(input.component.host_network);
    }

    #[test]
    fn an_image_nobody_names_is_an_error_naming_the_section() {
        let nothing = |_: &str| None;
        let enabled = spec(Some(true), json!({"enabled": true}));
        let error = fixtures::with_cluster(&nothing, |cluster| validate(&enabled, cluster))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("vfioManager") && error.contains(IMAGE_ENV),
            "{error}"
        );
        let only_own = |name: &str| (name == IMAGE_ENV).then(|| "vfio:1".to_owned());
        let error = fixtures::with_cluster(&only_own, |cluster| validate(&enabled, cluster))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("vfioManager.driverManager") && error.contains(MANAGER_IMAGE_ENV),
            "{error}"
        );
        let partial = spec(
            Some(true),
            json!({"enabled": true, "image": "x", "version": "1"}),
        );
        let error = check(&partial).unwrap_err().to_string();
        assert!(error.contains("vfioManager: incomplete image"), "{error}");
    }
}
