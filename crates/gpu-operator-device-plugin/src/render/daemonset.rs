//! `nvidia-device-plugin-daemonset`: the `toolkit-validation` barrier, the plugin container
//! started by its entrypoint ConfigMap with NVIDIA's env (MIG strategy, CDI, GDS/GDRCopy, MPS
//! root), the host paths it needs, and the config manager when `devicePlugin.config` is set.

use gpu_operator_core::build::{
    barrier, daemonset,
    pod::{host_path, mount, privileged},
};
use k8s_openapi::api::{
    apps::v1::DaemonSet,
    core::v1::{ConfigMapVolumeSource, Container, PodSpec, Volume, VolumeMount},
};

use super::{Plugin, config_map, finish, mps_volumes};
use crate::{DAEMONSET, ENTRYPOINT_CONFIG_MAP, Input, SERVICE_ACCOUNT};

/// The plugin container, also the process the config manager signals.
const CONTAINER: &str = "nvidia-device-plugin";

/// The DaemonSet.
pub fn build(input: &Input) -> DaemonSet {
    let entrypoint = VolumeMount {
        read_only: Some(true),
        sub_path: Some(config_map::KEY.to_owned()),
        ..mount("nvidia-device-plugin-entrypoint", "/bin/entrypoint.sh")
    };
    let host_to_container = |m: VolumeMount| VolumeMount {
        mount_propagation: Some("HostToContainer".to_owned()),
        ..m
    };
    let main = Container {
        name: CONTAINER.to_owned(),
        image: Some(input.image.clone()),
        command: Some(vec!["/bin/sh".to_owned(), "-c".to_owned()]),
        args: Some(vec!["/bin/entrypoint.sh".to_owned()]),
        env: Some(daemonset::merge_env(&env(input), &input.component.env)),
        security_context: Some(privileged()),
        volume_mounts: Some(vec![
            entrypoint,
            mount("device-plugin", "/var/lib/kubelet/device-plugins"),
            mount(barrier::VALIDATIONS_VOLUME, barrier::VALIDATIONS_DIR),
            host_to_container(mount("driver-install-dir", "/driver-root")),
            host_to_container(VolumeMount {
                read_only: Some(true),
                ..mount("host-root", "/host")
            }),
            mount("cdi-root", "/var/run/cdi"),
            mount("mps-shm", "/dev/shm"),
            mount("mps-root", "/mps"),
        ]),
        ..Container::default()
    };
    let mut volumes = vec![
        Volume {
            name: "nvidia-device-plugin-entrypoint".to_owned(),
            config_map: Some(ConfigMapVolumeSource {
                name: ENTRYPOINT_CONFIG_MAP.to_owned(),
                default_mode: Some(0o700),
                ..ConfigMapVolumeSource::default()
            }),
            ..Volume::default()
        },
        host_path("device-plugin", "/var/lib/kubelet/device-plugins", None),
        barrier::volume(),
        host_path(
            "driver-install-dir",
            "/run/nvidia/driver",
            Some("DirectoryOrCreate"),
        ),
        host_path("host-root", "/", None),
        host_path("cdi-root", "/var/run/cdi", Some("DirectoryOrCreate")),
    ];
    volumes.extend(mps_volumes(&input.mps_root));
    let pod = PodSpec {
        service_account_name: Some(SERVICE_ACCOUNT.to_owned()),
        init_containers: Some(vec![barrier::wait_for("toolkit", &input.validator_image)]),
        containers: vec![main],
        volumes: Some(volumes),
        ..PodSpec::default()
    };
    let plugin = Plugin {
        name: DAEMONSET,
        main: CONTAINER,
        process: CONTAINER,
        args_to_main: true,
    };
    finish(pod, input, &plugin)
}

/// The operator's env of the plugin container (the user's env is merged over it).
fn env(input: &Input) -> Vec<(&'static str, String)> {
    let on = || "true".to_owned();
    let mut env = vec![
        ("PASS_DEVICE_SPECS", on()),
        ("FAIL_ON_INIT_ERROR", on()),
        ("DEVICE_LIST_STRATEGY", "envvar".to_owned()),
        ("DEVICE_ID_STRATEGY", "uuid".to_owned()),
        ("NVIDIA_VISIBLE_DEVICES", "all".to_owned()),
        ("NVIDIA_DRIVER_CAPABILITIES", "all".to_owned()),
        ("MPS_ROOT", input.mps_root.clone()),
    ];
    if input.gds_enabled {
        env.extend([("GDS_ENABLED", on()), ("MOFED_ENABLED", on())]);
    }
    if input.gdrcopy_enabled {
        env.push(("GDRCOPY_ENABLED", on()));
    }
    env.extend(input.mig_env.iter().cloned());
    if input.cdi_enabled {
        if let Some(strategy) = env.iter_mut().find(|(n, _)| *n == "DEVICE_LIST_STRATEGY") {
            "cdi-annotations,cdi-cri".clone_into(&mut strategy.1);
        }
        env.extend([
            ("CDI_ENABLED", on()),
            ("CDI_ANNOTATION_PREFIX", "cdi.k8s.io/".to_owned()),
        ]);
        if let Some(hook) = &input.cdi_hook_path {
            env.push(("NVIDIA_CDI_HOOK_PATH", hook.clone()));
        }
    }
    env
}

#[cfg(test)]
mod tests;
