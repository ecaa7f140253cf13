//! The validation barrier: operands start only after the validator has checked what they depend
//! on. The validator leaves `<component>-ready` files in `/run/nvidia/validations` on the host;
//! an operand's init container (`toolkit-validation`, `driver-validation`, …, named as NVIDIA's)
//! runs a `sh -c` loop in the validator image until its file is there. Both validator images
//! answer that: NVIDIA's carries a busybox `/bin/sh`, ours a static busybox (the Dockerfile), so a
//! ClusterPolicy naming either image works (the contract is `crates/gpu-operator/tests/
//! validator_images.yaml`). Those init containers follow `spec.validator` (pull policy, pull
//! secrets, resources, and the `driver`/`toolkit` env), as NVIDIA's do: [`apply_validator`].

use gpu_operator_api::spec::ValidatorSpec;
use k8s_openapi::api::core::v1::{
    Container, LocalObjectReference, PodSpec, ResourceRequirements, SecurityContext, Volume,
    VolumeMount,
};

use crate::build::daemonset::merge_env;

/// The host directory of the status files.
pub const VALIDATIONS_DIR: &str = "/run/nvidia/validations";
/// The volume name of [`VALIDATIONS_DIR`] in operand pods.
pub const VALIDATIONS_VOLUME: &str = "run-nvidia-validations";
/// Seconds between two looks for the status file.
const POLL_SECONDS: u32 = 5;

/// The `sh -c` script that returns once `<component>-ready` exists in [`VALIDATIONS_DIR`]: only
/// shell builtins (`until`, `[`, `echo`) and `sleep`, which every busybox has.
pub fn wait_script(component: &str) -> String {
    format!(
        "until [ -f {VALIDATIONS_DIR}/{component}-ready ]; do echo waiting for the {component} \
         validation on this node; sleep {POLL_SECONDS}; done; echo {component} validation found"
    )
}

/// The init container that waits for `<component>-ready` (`component` is `driver`, `toolkit`,
/// `cuda` or `plugin`), run from `validator_image`.
pub fn wait_for(component: &str, validator_image: &str) -> Container {
    Container {
        name: format!("{component}-validation"),
        image: Some(validator_image.to_owned()),
        command: Some(vec!["sh".to_owned(), "-c".to_owned()]),
        args: Some(vec![wait_script(component)]),
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
    crate::build::pod::host_path(
        VALIDATIONS_VOLUME,
        VALIDATIONS_DIR,
        Some("DirectoryOrCreate"),
    )
}

/// Makes `pod` wait for the container toolkit on its node: the `toolkit-validation` init
/// container (its only one) from `validator_image`, the status-file volume, and `validator`'s
/// settings on that init container (see [`apply_validator`]).
pub(crate) fn after_toolkit(
    pod: &mut PodSpec,
    validator_image: &str,
    validator: Option<&ValidatorSpec>,
) {
    pod.init_containers = Some(vec![wait_for("toolkit", validator_image)]);
    pod.volumes.get_or_insert_with(Vec::new).push(volume());
    apply_validator(pod, validator);
}

/// Applies `spec.validator`'s pull policy, pull secrets and resources to the pod's `*-validation`
/// init containers (after the operand's own component settings, which must not reach them), and
/// the `validator.driver` / `validator.toolkit` env to `driver-validation` / `toolkit-validation`.
pub(crate) fn apply_validator(pod: &mut PodSpec, validator: Option<&ValidatorSpec>) {
    let default = ValidatorSpec::default();
    let validator = validator.unwrap_or(&default);
    let policy = crate::build::image::pull_policy(&validator.image);
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
        assert_eq!(init.command.unwrap(), ["sh", "-c"]);
        assert_eq!(
            init.args.unwrap(),
            [
                "until [ -f /run/nvidia/validations/toolkit-ready ]; do echo waiting for the toolkit \
              validation on this node; sleep 5; done; echo toolkit validation found"
            ]
        );
        let mount = &init.volume_mounts.unwrap()[0];
        assert_eq!(mount.name, volume().name);
        assert_eq!(volume().host_path.unwrap().path, "/run/nvidia/validations");
    }

    /// The script really waits: run by a POSIX shell (the host's `sh`, as busybox's would) with
    /// the status directory pointed at a temporary one, it keeps looping while the file is
    /// missing and returns once the validator has written it.
    #[test]
    fn the_wait_script_loops_until_the_file_appears_when_run_by_a_shell() {
        let dir = tempfile::tempdir().unwrap();
        let script = wait_script("toolkit").replace(VALIDATIONS_DIR, &dir.path().to_string_lossy());
        let mut child = std::process::Command::new("sh")
            .args(["-c", &script])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert!(
            child.try_wait().unwrap().is_none(),
            "returned without the file"
        );
        std::fs::write(dir.path().join("toolkit-ready"), "").unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("waiting for the toolkit validation"),
            "{text}"
        );
        assert!(text.ends_with("toolkit validation found\n"), "{text}");
    }
}
