//! The validation barrier: operands start only after the validator has checked what they depend
//! on. The validator leaves `<component>-ready` files in `/run/nvidia/validations` on the host;
//! an operand's init container (`toolkit-validation`, `driver-validation`, …, named as NVIDIA's)
//! runs the validator image's `gpu-operator-validator wait <component>` until its file is there.

use k8s_openapi::api::core::v1::{
    Container, HostPathVolumeSource, SecurityContext, Volume, VolumeMount,
};

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

#[cfg(test)]
mod tests {
    use super::*;

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
