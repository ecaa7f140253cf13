//! DaemonSet `nvidia-vgpu-device-manager`, as NVIDIA builds it: the `vgpu-manager-validation`
//! init container (validator image, `spec.validator`'s settings) waits until the vGPU manager is
//! validated on the node (`vgpu-manager-ready` when it runs as a container, `host-vgpu-manager-ready`
//! when it is installed on the host); then the privileged `nvidia-vgpu-device-manager` container
//! applies the configuration the node's `nvidia.com/vgpu.config` label selects (else
//! `DEFAULT_VGPU_CONFIG`) from `CONFIG_FILE`, with `/sys`, the host root and the driver root.

use gpu_operator_api::{labels::operand, validator::status_file};
use gpu_operator_core::{
    build::{
        barrier::{self, VALIDATIONS_DIR, VALIDATIONS_VOLUME},
        daemonset::{Identity, field_env, override_env},
        pod::{self, Finish, Wrap, host_path, mount, propagated},
    },
    contract::Operand as _,
};
use k8s_openapi::api::{
    apps::v1::DaemonSet,
    core::v1::{ConfigMapVolumeSource, Container, EnvVar, PodSpec, SecurityContext, Volume},
};

use crate::{CUSTOM_CONFIG, DEFAULT_CONFIG, Input, NAME, VgpuDeviceManager, validate::CONFIG_KEY};

/// The init container that waits for the vGPU manager.
pub const BARRIER_CONTAINER: &str = "vgpu-manager-validation";
/// Where the configuration ConfigMap is mounted.
const CONFIG_DIR: &str = "/vgpu-config";
/// The variable of the configuration applied to unlabelled nodes.
const DEFAULT_VGPU_CONFIG: &str = "DEFAULT_VGPU_CONFIG";
/// Seconds between two looks for a status file.
const POLL_SECONDS: u32 = 5;

/// The DaemonSet.
pub fn build(input: &Input) -> DaemonSet {
    let config_map = if input.custom.is_some() {
        CUSTOM_CONFIG
    } else {
        DEFAULT_CONFIG
    };
    let pod = PodSpec {
        service_account_name: Some(NAME.to_owned()),
        init_containers: Some(vec![wait(&input.validator_image)]),
        containers: vec![manager(input)],
        volumes: Some(vec![
            Volume {
                name: "vgpu-config".to_owned(),
                config_map: Some(ConfigMapVolumeSource {
                    name: config_map.to_owned(),
                    ..ConfigMapVolumeSource::default()
                }),
                ..Volume::default()
            },
            host_path("host-sys", "/sys", Some("Directory")),
            host_path("host-root", "/", None),
            host_path(
                "driver-install-dir",
                "/run/nvidia/driver",
                Some("DirectoryOrCreate"),
            ),
            barrier::volume(),
        ]),
        ..PodSpec::default()
    };
    let steps = Finish {
        component: &input.component,
        barrier: input.shared.in_pod(),
        host_paths: input.shared.rewrite_host_paths(),
        args: Some(NAME),
    };
    pod::finish(pod, steps).into_daemonset(Wrap {
        identity: Identity {
            name: NAME,
            component: VgpuDeviceManager::NAME,
            deploy_label: operand::VGPU_DEVICE_MANAGER,
            always_on_delete: false,
        },
        daemonsets: &input.shared.daemonsets,
        gpus: None,
    })
}

/// The barrier: privileged, as root, until either status file of the vGPU manager is there.
/// Shell builtins and `sleep` only.
fn wait(validator_image: &str) -> Container {
    let dir = VALIDATIONS_DIR;
    let (container, host) = (status_file::VGPU_MANAGER, status_file::HOST_VGPU_MANAGER);
    let script = format!(
        "until [ -f {dir}/{container} ] || [ -f {dir}/{host} ]; do echo waiting for the vGPU \
         manager validation on this node; sleep {POLL_SECONDS}; done; echo vGPU manager \
         validation found"
    );
    Container {
        name: BARRIER_CONTAINER.to_owned(),
        image: Some(validator_image.to_owned()),
        command: Some(vec!["sh".to_owned(), "-c".to_owned()]),
        args: Some(vec![script]),
        security_context: Some(SecurityContext {
            run_as_user: Some(0),
            ..pod::privileged()
        }),
        volume_mounts: Some(vec![propagated(
            mount(VALIDATIONS_VOLUME, VALIDATIONS_DIR),
            "HostToContainer",
        )]),
        ..Container::default()
    }
}

/// The manager, with `vgpuDeviceManager.env` over NVIDIA's variables but for
/// `DEFAULT_VGPU_CONFIG`, which `vgpuDeviceManager.config.default` decides (as NVIDIA sets it
/// last).
fn manager(input: &Input) -> Container {
    let literal = |name: &str, value: &str| EnvVar {
        name: name.to_owned(),
        value: Some(value.to_owned()),
        value_from: None,
    };
    let mut env = override_env(
        vec![
            field_env("NAMESPACE", "metadata.namespace"),
            field_env("NODE_NAME", "spec.nodeName"),
            literal("CONFIG_FILE", &format!("{CONFIG_DIR}/{CONFIG_KEY}")),
        ],
        &input.component.env,
    );
    env.retain(|e| e.name != DEFAULT_VGPU_CONFIG);
    env.push(literal(DEFAULT_VGPU_CONFIG, &input.default_config));
    Container {
        name: NAME.to_owned(),
        image: Some(input.image.clone()),
        env: Some(env),
        security_context: Some(pod::privileged()),
        volume_mounts: Some(vec![
            mount("vgpu-config", CONFIG_DIR),
            mount("host-sys", "/sys"),
            propagated(mount("host-root", "/host"), "HostToContainer"),
            propagated(
                mount("driver-install-dir", "/driver-root"),
                "HostToContainer",
            ),
        ]),
        ..Container::default()
    }
}

#[cfg(test)]
mod tests;
