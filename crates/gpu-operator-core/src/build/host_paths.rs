//! `spec.hostPaths` rewrites every operand shares, by NVIDIA's volume names: `rootFS` moves the
//! `host-root` and `host-dev-char` volumes and sets `HOST_ROOT` in every container;
//! `driverInstallDir` moves the `driver-install-dir` volume and tells the `driver-validation`
//! init container where it is; `kubeletRootDir` moves every host path under `/var/lib/kubelet`
//! (device plugin sockets, pod resources). Operands ask for [`apply`] through
//! `crate::build::pod::finish`.

use gpu_operator_api::spec::HostPathsSpec;
use k8s_openapi::api::core::v1::{Container, EnvVar, PodSpec};

/// Default host root filesystem (decided on the API type).
pub const DEFAULT_ROOT_FS: &str = HostPathsSpec::DEFAULT_ROOT_FS;
/// Default host directory of a containerized driver (decided on the API type).
pub const DEFAULT_DRIVER_INSTALL_DIR: &str = HostPathsSpec::DEFAULT_DRIVER_INSTALL_DIR;
/// Default kubelet root directory (decided on the API type).
pub const DEFAULT_KUBELET_ROOT_DIR: &str = HostPathsSpec::DEFAULT_KUBELET_ROOT_DIR;
/// Volume of the host's root filesystem.
pub const HOST_ROOT_VOLUME: &str = "host-root";
/// Volume of the host's `/dev/char`.
pub const HOST_DEV_CHAR_VOLUME: &str = "host-dev-char";
/// Volume of the containerized driver's root.
pub const DRIVER_INSTALL_DIR_VOLUME: &str = "driver-install-dir";

/// Rewrites `pod`'s host paths for `paths` (unset or default values change nothing).
pub(crate) fn apply(pod: &mut PodSpec, paths: Option<&HostPathsSpec>) {
    let Some(paths) = paths else { return };
    if let Some(root) = custom(paths.root_fs.as_deref(), DEFAULT_ROOT_FS) {
        if set_host_path(pod, HOST_ROOT_VOLUME, root) {
            for c in containers(pod) {
                set_env(c, "HOST_ROOT", root);
            }
        }
        let dev_char = format!("{}/dev/char", root.trim_end_matches('/'));
        set_host_path(pod, HOST_DEV_CHAR_VOLUME, &dev_char);
    }
    if let Some(dir) = custom(
        paths.driver_install_dir.as_deref(),
        DEFAULT_DRIVER_INSTALL_DIR,
    ) && set_host_path(pod, DRIVER_INSTALL_DIR_VOLUME, dir)
        && let Some(check) = pod
            .init_containers
            .iter_mut()
            .flatten()
            .find(|c| c.name == "driver-validation")
    {
        set_env(check, "DRIVER_INSTALL_DIR", dir);
        set_env(check, "DRIVER_INSTALL_DIR_CTR_PATH", dir);
        for mount in check.volume_mounts.iter_mut().flatten() {
            if mount.name == DRIVER_INSTALL_DIR_VOLUME {
                dir.clone_into(&mut mount.mount_path);
            }
        }
    }
    if let Some(kubelet) = custom(paths.kubelet_root_dir.as_deref(), DEFAULT_KUBELET_ROOT_DIR) {
        for host in pod
            .volumes
            .iter_mut()
            .flatten()
            .filter_map(|v| v.host_path.as_mut())
        {
            if let Some(rest) = host.path.strip_prefix(DEFAULT_KUBELET_ROOT_DIR)
                && (rest.is_empty() || rest.starts_with('/'))
            {
                host.path = format!("{}{rest}", kubelet.trim_end_matches('/'));
            }
        }
    }
}

fn custom<'a>(value: Option<&'a str>, default: &str) -> Option<&'a str> {
    value.filter(|v| !v.is_empty() && *v != default)
}

/// Points host-path volume `name` at `path`; whether the pod has it.
fn set_host_path(pod: &mut PodSpec, name: &str, path: &str) -> bool {
    let host = pod
        .volumes
        .iter_mut()
        .flatten()
        .filter(|v| v.name == name)
        .find_map(|v| v.host_path.as_mut());
    match host {
        Some(host) => {
            path.clone_into(&mut host.path);
            true
        }
        None => false,
    }
}

fn containers(pod: &mut PodSpec) -> impl Iterator<Item = &mut Container> {
    pod.init_containers
        .iter_mut()
        .flatten()
        .chain(pod.containers.iter_mut())
}

fn set_env(container: &mut Container, name: &str, value: &str) {
    let env = container.env.get_or_insert_with(Vec::new);
    match env.iter_mut().find(|e| e.name == name) {
        Some(existing) => {
            existing.value = Some(value.to_owned());
            existing.value_from = None;
        }
        None => env.push(EnvVar {
            name: name.to_owned(),
            value: Some(value.to_owned()),
            value_from: None,
        }),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{HostPathVolumeSource, Volume, VolumeMount};

    use super::*;

    fn volume(name: &str, path: &str) -> Volume {
        Volume {
            name: name.into(),
            host_path: Some(HostPathVolumeSource {
                path: path.into(),
                type_: None,
            }),
            ..Volume::default()
        }
    }

    fn pod() -> PodSpec {
        PodSpec {
            init_containers: Some(vec![Container {
                name: "driver-validation".into(),
                volume_mounts: Some(vec![VolumeMount {
                    name: DRIVER_INSTALL_DIR_VOLUME.into(),
                    mount_path: DEFAULT_DRIVER_INSTALL_DIR.into(),
                    ..VolumeMount::default()
                }]),
                ..Container::default()
            }]),
            containers: vec![Container {
                name: "main".into(),
                ..Container::default()
            }],
            volumes: Some(vec![
                volume(HOST_ROOT_VOLUME, "/"),
                volume(HOST_DEV_CHAR_VOLUME, "/dev/char"),
                volume(DRIVER_INSTALL_DIR_VOLUME, DEFAULT_DRIVER_INSTALL_DIR),
                volume("device-plugin", "/var/lib/kubelet/device-plugins"),
                volume("other", "/var/lib/kubeletx"),
            ]),
            ..PodSpec::default()
        }
    }

    fn path(pod: &PodSpec, name: &str) -> String {
        let volumes = pod.volumes.as_ref().unwrap();
        let volume = volumes.iter().find(|v| v.name == name).unwrap();
        volume.host_path.as_ref().unwrap().path.clone()
    }

    fn env(c: &Container, name: &str) -> Option<String> {
        c.env
            .iter()
            .flatten()
            .find(|e| e.name == name)
            .and_then(|e| e.value.clone())
    }

    #[test]
    fn defaults_change_nothing() {
        let mut changed = pod();
        let defaults = HostPathsSpec {
            root_fs: Some("/".into()),
            driver_install_dir: Some(DEFAULT_DRIVER_INSTALL_DIR.into()),
            kubelet_root_dir: Some(DEFAULT_KUBELET_ROOT_DIR.into()),
        };
        apply(&mut changed, Some(&defaults));
        apply(&mut changed, None);
        assert_eq!(changed, pod());
    }

    #[test]
    fn root_fs_moves_host_root_and_dev_char_and_sets_host_root_everywhere() {
        let mut pod = pod();
        let paths = HostPathsSpec {
            root_fs: Some("/host-fs".into()),
            ..HostPathsSpec::default()
        };
        apply(&mut pod, Some(&paths));
        assert_eq!(path(&pod, HOST_ROOT_VOLUME), "/host-fs");
        assert_eq!(path(&pod, HOST_DEV_CHAR_VOLUME), "/host-fs/dev/char");
        assert_eq!(
            env(&pod.containers[0], "HOST_ROOT").as_deref(),
            Some("/host-fs")
        );
        let init = &pod.init_containers.as_ref().unwrap()[0];
        assert_eq!(env(init, "HOST_ROOT").as_deref(), Some("/host-fs"));
    }

    #[test]
    fn driver_install_dir_moves_the_volume_and_tells_driver_validation() {
        let mut pod = pod();
        let paths = HostPathsSpec {
            driver_install_dir: Some("/opt/nvidia/driver".into()),
            ..HostPathsSpec::default()
        };
        apply(&mut pod, Some(&paths));
        assert_eq!(path(&pod, DRIVER_INSTALL_DIR_VOLUME), "/opt/nvidia/driver");
        let init = &pod.init_containers.as_ref().unwrap()[0];
        assert_eq!(
            env(init, "DRIVER_INSTALL_DIR_CTR_PATH").as_deref(),
            Some("/opt/nvidia/driver")
        );
        assert_eq!(
            init.volume_mounts.as_ref().unwrap()[0].mount_path,
            "/opt/nvidia/driver"
        );
        assert_eq!(env(&pod.containers[0], "DRIVER_INSTALL_DIR"), None);
    }

    #[test]
    fn kubelet_root_dir_moves_host_paths_under_the_kubelet_root() {
        let mut pod = pod();
        let paths = HostPathsSpec {
            kubelet_root_dir: Some("/data/kubelet/".into()),
            ..HostPathsSpec::default()
        };
        apply(&mut pod, Some(&paths));
        assert_eq!(path(&pod, "device-plugin"), "/data/kubelet/device-plugins");
        assert_eq!(path(&pod, "other"), "/var/lib/kubeletx");
    }
}
