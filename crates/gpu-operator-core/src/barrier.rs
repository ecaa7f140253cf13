//! The validation barrier: operands start only after the validator has checked what they depend
//! on. The validator leaves `<component>-ready` files in `/run/nvidia/validations` on the host;
//! an operand's init container (`toolkit-validation`, `driver-validation`, …, named as NVIDIA's)
//! runs the validator image's `gpu-operator-validator wait <component>` until its file is there.

use gpu_operator_api::spec::ValidatorSpec;
use k8s_openapi::api::core::v1::{
    Container, HostPathVolumeSource, LocalObjectReference, PodSpec, ResourceRequirements,
    SecurityContext, Volume, VolumeMount,
};

use crate::{daemonset, image};

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

/// Puts the barrier in front of `pod`: a [`wait_for`] init container per component, in order,
/// with the `validator` section's settings as NVIDIA applies them to every operand (its
/// `imagePullPolicy`, `resources` and pull secrets; `validator.driver.env` on `driver-validation`
/// and `validator.toolkit.env` on `toolkit-validation`), and the status-file volume. Call it after
/// [`daemonset::apply_component`], whose settings are the operand's, not the validator's.
pub fn gate(
    pod: &mut PodSpec,
    components: &[&str],
    validator_image: &str,
    validator: &ValidatorSpec,
) {
    let policy = image::pull_policy(&validator.image);
    let resources = validator
        .container
        .resources
        .as_ref()
        .map(|r| ResourceRequirements {
            limits: r.limits.clone(),
            requests: r.requests.clone(),
            ..ResourceRequirements::default()
        });
    for component in components {
        let mut init = wait_for(component, validator_image);
        init.image_pull_policy = Some(policy.to_owned());
        init.resources.clone_from(&resources);
        let env = match *component {
            "driver" => validator.driver.as_ref(),
            "toolkit" => validator.toolkit.as_ref(),
            _ => None,
        }
        .and_then(|c| c.env.as_deref())
        .unwrap_or_default();
        if !env.is_empty() {
            init.env = Some(daemonset::merge_env(&[], env));
        }
        pod.init_containers.get_or_insert_with(Vec::new).push(init);
    }
    pod.volumes.get_or_insert_with(Vec::new).push(volume());
    for secret in validator.image.pull_secrets() {
        let secrets = pod.image_pull_secrets.get_or_insert_with(Vec::new);
        if !secrets.iter().any(|s| &s.name == secret) {
            secrets.push(LocalObjectReference {
                name: secret.clone(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use gpu_operator_api::spec::{EnvVar, ValidatorComponentSpec};

    use super::*;

    #[test]
    fn the_gate_carries_the_validator_settings_and_its_components_env() {
        let validator = ValidatorSpec {
            toolkit: Some(ValidatorComponentSpec {
                env: Some(vec![EnvVar::new("X", "1")]),
            }),
            image: gpu_operator_api::spec::ImageSpec {
                pull_policy: Some("Always".into()),
                pull_secrets: Some(vec!["regcred".into()]),
                ..Default::default()
            },
            ..ValidatorSpec::default()
        };
        let mut pod = PodSpec::default();
        gate(&mut pod, &["toolkit", "driver"], "v:1", &validator);
        let inits = pod.init_containers.unwrap();
        assert_eq!(inits[0].name, "toolkit-validation");
        assert_eq!(inits[0].env.as_ref().unwrap()[0].name, "X");
        assert_eq!(inits[1].name, "driver-validation");
        assert_eq!(inits[1].env, None);
        assert_eq!(inits[1].image_pull_policy.as_deref(), Some("Always"));
        assert_eq!(pod.image_pull_secrets.unwrap()[0].name, "regcred");
        assert_eq!(pod.volumes.unwrap()[0].name, VALIDATIONS_VOLUME);
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
