//! The validation barrier: operands start only after the validator has checked what they depend
//! on. The validator leaves `<component>-ready` files in `/run/nvidia/validations` on the host;
//! an operand's init container (`toolkit-validation`, `driver-validation`, …, named as NVIDIA's)
//! runs the validator image's `gpu-operator-validator wait <component>` until its file is there.
//! Those init containers follow `spec.validator` (pull policy, pull secrets, resources, and the
//! `driver`/`toolkit` env), as NVIDIA's do: [`apply_validator`].

use gpu_operator_api::spec::ValidatorSpec;
use k8s_openapi::api::core::v1::{
    Container, HostPathVolumeSource, LocalObjectReference, PodSpec, ResourceRequirements,
    SecurityContext, Volume, VolumeMount,
};

use crate::daemonset::merge_env;

/// The host directory of the status files.
pub const VALIDATIONS_DIR: &str = "/run/nvidia/validations";
/// The volume name of [`VALIDATIONS_DIR`] in operand pods.
pub const VALIDATIONS_VOLUME: &str = "run-nvidia-validations";
/// The validator binary in the validator image.
pub const VALIDATOR_BINARY: &str = "gpu-operator-validator";

/// The init container that waits for `<component>-ready` (`component` is `driver`, `toolkit`,
/// `cuda` or `plugin`), run from `validator_image`.
pub fn wait_for(component: &str, validator_image: &str) -> Container {
    Container {
        name: format!("{component}-validation"),
        image: Some(validator_image.to_owned()),
        command: Some(vec![VALIDATOR_BINARY.to_owned()]),
        args: Some(vec!["wait".to_owned(), component.to_owned()]),
        security_context: Some(SecurityContext {
            run_as_user: Some(0),
            ..SecurityContext::default()
        }),
        volume_mounts: Some(vec![VolumeMount {
            name: VALIDATIONS_VOLUME.to_owned(),
            mount_path: VALIDATIONS_DIR.to_owned(),
            mount_propagation: Some("HostToContainer".to_owned()),
            ..VolumeMount::default()
        }]),
        ..Container::default()
    }
}

/// The host volume of the status files, for a pod with a [`wait_for`] init container.
pub fn volume() -> Volume {
    Volume {
        name: VALIDATIONS_VOLUME.to_owned(),
        host_path: Some(HostPathVolumeSource {
            path: VALIDATIONS_DIR.to_owned(),
            type_: Some("DirectoryOrCreate".to_owned()),
        }),
        ..Volume::default()
    }
}

/// Makes `pod` wait for the container toolkit on its node: the `toolkit-validation` init
/// container (its only one) from `validator_image`, the status-file volume, and `validator`'s
/// settings on that init container (see [`apply_validator`]).
pub fn after_toolkit(pod: &mut PodSpec, validator_image: &str, validator: Option<&ValidatorSpec>) {
    pod.init_containers = Some(vec![wait_for("toolkit", validator_image)]);
    pod.volumes.get_or_insert_with(Vec::new).push(volume());
    apply_validator(pod, validator);
}

/// Applies `spec.validator`'s pull policy, pull secrets and resources to the pod's `*-validation`
/// init containers (after the operand's own component settings, which must not reach them), and
/// the `validator.driver` / `validator.toolkit` env to `driver-validation` / `toolkit-validation`.
pub fn apply_validator(pod: &mut PodSpec, validator: Option<&ValidatorSpec>) {
    let default = ValidatorSpec::default();
    let validator = validator.unwrap_or(&default);
    let policy = crate::image::pull_policy(&validator.image);
    let resources = validator
        .container
        .resources
        .as_ref()
        .map(|r| ResourceRequirements {
            limits: r.limits.clone(),
            requests: r.requests.clone(),
            ..ResourceRequirements::default()
        });
    let checks = pod
        .init_containers
        .iter_mut()
        .flatten()
        .filter(|c| c.name.ends_with("-validation"));
    for check in checks {
        check.image_pull_policy = Some(policy.to_owned());
        check.resources.clone_from(&resources);
        let user = match check.name.as_str() {
            "driver-validation" => validator.driver.as_ref(),
            "toolkit-validation" => validator.toolkit.as_ref(),
            _ => None,
        };
        if let Some(env) = user.and_then(|u| u.env.as_deref()) {
            check.env = Some(merge_env(&[], env)).filter(|e| !e.is_empty());
        }
    }
    let secrets = pod.image_pull_secrets.get_or_insert_with(Vec::new);
    for name in validator.image.pull_secrets() {
        if !secrets.iter().any(|s| &s.name == name) {
            secrets.push(LocalObjectReference { name: name.clone() });
        }
    }
    if secrets.is_empty() {
        pod.image_pull_secrets = None;
    }
}

#[cfg(test)]
mod tests {
    use gpu_operator_api::spec::{EnvVar, ImageSpec, ValidatorComponentSpec};

    use super::*;

    #[test]
    fn barrier_containers_follow_the_validator_settings_not_the_operands() {
        let mut pod = PodSpec {
            init_containers: Some(vec![wait_for("toolkit", "v:1")]),
            image_pull_secrets: Some(vec![LocalObjectReference {
                name: "plugin-secret".into(),
            }]),
            ..PodSpec::default()
        };
        pod.init_containers.as_mut().unwrap()[0].image_pull_policy = Some("Always".into());
        let validator = ValidatorSpec {
            image: ImageSpec {
                pull_secrets: Some(vec!["validator-secret".into()]),
                ..ImageSpec::default()
            },
            toolkit: Some(ValidatorComponentSpec {
                env: Some(vec![EnvVar::new("DEBUG", "1")]),
            }),
            ..ValidatorSpec::default()
        };
        apply_validator(&mut pod, Some(&validator));
        let check = &pod.init_containers.as_ref().unwrap()[0];
        assert_eq!(check.image_pull_policy.as_deref(), Some("IfNotPresent"));
        assert_eq!(check.env.as_ref().unwrap()[0].name, "DEBUG");
        let secrets: Vec<_> = pod
            .image_pull_secrets
            .unwrap()
            .into_iter()
            .map(|s| s.name)
            .collect();
        assert_eq!(secrets, ["plugin-secret", "validator-secret"]);
    }

    #[test]
    fn the_barrier_waits_on_the_components_file_from_the_host_directory() {
        let init = wait_for("toolkit", "ghcr.io/x/gpu-operator:1");
        assert_eq!(init.name, "toolkit-validation");
        assert_eq!(init.args.unwrap(), ["wait", "toolkit"]);
        let mount = &init.volume_mounts.unwrap()[0];
        assert_eq!(mount.name, volume().name);
        assert_eq!(volume().host_path.unwrap().path, "/run/nvidia/validations");
    }
}
