//! DaemonSet `nvidia-vgpu-manager-daemonset`, as NVIDIA builds it: the `k8s-driver-manager` init
//! container unloads any NVIDIA driver (no GPU pod eviction, no drain: a `vm-vgpu` node runs no
//! GPU containers), then the privileged `nvidia-vgpu-manager-ctr` container (`nvidia-driver
//! init`) installs and loads the vGPU host driver, with the host's PID and IPC namespaces, its
//! cgroups, VFIO devices, logs and firmware path. NVIDIA gives it no probes and two minutes to
//! stop (the driver unloads). No validation barrier: it is the node's driver. It selects the OS
//! its image is built for. NVIDIA's OpenShift Driver Toolkit sidecar is left out (no OpenShift).

use gpu_operator_api::labels::{NFD_OS_RELEASE_ID, NFD_OS_RELEASE_VERSION_ID, operand};
use gpu_operator_core::{
    build::{
        daemonset::{Identity, annotate_pods, field_env, override_env},
        pod::{self, Barrier, Finish, Wrap, host_path, mount, propagated, read_only_mount},
    },
    contract::Operand as _,
};
use k8s_openapi::api::{
    apps::v1::DaemonSet,
    core::v1::{
        ConfigMapVolumeSource, Container, EnvVar, KeyToPath, PodSpec, SELinuxOptions,
        SecurityContext, Volume, VolumeMount,
    },
};

use crate::{CONTAINER, DAEMONSET, ForOs, Input, SERVICE_ACCOUNT, VgpuManager};

/// Name of the driver manager init container.
pub const MANAGER_CONTAINER: &str = "k8s-driver-manager";
/// Where the host driver's installer reads the kernel module parameter files.
const DRIVERS_DIR: &str = "/drivers";
/// How long a vGPU manager pod may take to stop, as NVIDIA gives it.
const GRACE_SECONDS: i64 = 120;

/// The DaemonSet for the OS `for_os`.
pub fn build(input: &Input, for_os: &ForOs) -> DaemonSet {
    let mut volumes = vec![
        host_path("run-nvidia", "/run/nvidia", Some("DirectoryOrCreate")),
        host_path("host-os-release", "/etc/os-release", None),
        host_path("cgroup", "/sys/fs/cgroup", Some("Directory")),
        host_path("vfio", "/dev/vfio", Some("Directory")),
        host_path("host-root", "/", None),
        host_path("host-sys", "/sys", Some("Directory")),
        host_path("var-log", "/var/log", Some("Directory")),
        host_path("dev-log", "/dev/log", None),
        host_path(
            "firmware-search-path",
            "/sys/module/firmware_class/parameters/path",
            None,
        ),
        host_path(
            "nv-firmware",
            "/run/nvidia/driver/lib/firmware",
            Some("DirectoryOrCreate"),
        ),
    ];
    let mut main = vgpu_manager(input, &for_os.image);
    if let Some((name, keys)) = &input.kernel_module_config {
        volumes.push(module_config_volume(name, keys));
        main.volume_mounts
            .get_or_insert_with(Vec::new)
            .extend(keys.iter().map(|key| VolumeMount {
                sub_path: Some(key.clone()),
                ..read_only_mount(name, &format!("{DRIVERS_DIR}/{key}"))
            }));
    }
    let pod = PodSpec {
        service_account_name: Some(SERVICE_ACCOUNT.to_owned()),
        host_pid: Some(true),
        host_ipc: Some(true),
        node_selector: Some(
            [
                (NFD_OS_RELEASE_ID.to_owned(), for_os.os.id.clone()),
                (
                    NFD_OS_RELEASE_VERSION_ID.to_owned(),
                    for_os.os.version_id.clone(),
                ),
            ]
            .into(),
        ),
        init_containers: Some(vec![manager(input)]),
        containers: vec![main],
        termination_grace_period_seconds: Some(GRACE_SECONDS),
        volumes: Some(volumes),
        ..PodSpec::default()
    };
    let steps = Finish {
        component: &input.component,
        barrier: Barrier::None,
        host_paths: input.shared.rewrite_host_paths(),
        args: Some(CONTAINER),
    };
    let mut finished = pod::finish(pod, steps);
    input
        .manager_pull
        .apply_to_init(finished.pod_mut(), MANAGER_CONTAINER);
    let mut ds = finished.into_daemonset(Wrap {
        identity: Identity {
            name: DAEMONSET,
            component: VgpuManager::NAME,
            deploy_label: operand::VGPU_MANAGER,
            always_on_delete: false,
        },
        daemonsets: &input.shared.daemonsets,
        gpus: None,
    });
    annotate_pods(
        &mut ds,
        "kubectl.kubernetes.io/default-container".to_owned(),
        CONTAINER.to_owned(),
    );
    ds
}

/// `k8s-driver-manager uninstall_driver`, with `vgpuManager.driverManager.env` over NVIDIA's
/// variables.
fn manager(input: &Input) -> Container {
    let env = vec![
        field_env("NODE_NAME", "spec.nodeName"),
        // Driver containers run with runc, never with the NVIDIA runtime.
        literal("NVIDIA_VISIBLE_DEVICES", "void"),
        literal("ENABLE_GPU_POD_EVICTION", "false"),
        literal("ENABLE_AUTO_DRAIN", "false"),
        field_env("OPERATOR_NAMESPACE", "metadata.namespace"),
    ];
    Container {
        name: MANAGER_CONTAINER.to_owned(),
        image: Some(input.manager_image.clone()),
        command: Some(vec!["driver-manager".to_owned()]),
        args: Some(vec!["uninstall_driver".to_owned()]),
        env: Some(override_env(env, &input.manager_env)),
        security_context: Some(pod::privileged()),
        volume_mounts: Some(vec![
            propagated(mount("run-nvidia", "/run/nvidia"), "Bidirectional"),
            propagated(read_only_mount("host-root", "/host"), "HostToContainer"),
            mount("host-sys", "/sys"),
        ]),
        ..Container::default()
    }
}

/// The `nvidia-vgpu-manager-ctr` container: `nvidia-driver init` from `image`, with
/// `vgpuManager.env` (NVIDIA sets no variable of its own here).
fn vgpu_manager(input: &Input, image: &str) -> Container {
    Container {
        name: CONTAINER.to_owned(),
        image: Some(image.to_owned()),
        command: Some(vec!["nvidia-driver".to_owned()]),
        args: Some(vec!["init".to_owned()]),
        env: Some(override_env(Vec::new(), &input.component.env)).filter(|e| !e.is_empty()),
        security_context: Some(SecurityContext {
            se_linux_options: Some(SELinuxOptions {
                level: Some("s0".to_owned()),
                ..SELinuxOptions::default()
            }),
            ..pod::privileged()
        }),
        volume_mounts: Some(vec![
            propagated(mount("run-nvidia", "/run/nvidia"), "Bidirectional"),
            mount("host-os-release", "/host-etc/os-release"),
            mount("vfio", "/dev/vfio"),
            mount("cgroup", "/sys/fs/cgroup"),
            mount("var-log", "/var/log"),
            mount("dev-log", "/dev/log"),
            mount(
                "firmware-search-path",
                "/sys/module/firmware_class/parameters/path",
            ),
            mount("nv-firmware", "/lib/firmware"),
        ]),
        ..Container::default()
    }
}

/// The `kernelModuleConfig` ConfigMap as a volume of its keys (NVIDIA's: the volume is named
/// after the ConfigMap).
fn module_config_volume(name: &str, keys: &[String]) -> Volume {
    Volume {
        name: name.to_owned(),
        config_map: Some(ConfigMapVolumeSource {
            name: name.to_owned(),
            items: Some(
                keys.iter()
                    .map(|key| KeyToPath {
                        key: key.clone(),
                        path: key.clone(),
                        mode: None,
                    })
                    .collect(),
            ),
            ..ConfigMapVolumeSource::default()
        }),
        ..Volume::default()
    }
}

fn literal(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value: Some(value.to_owned()),
        value_from: None,
    }
}

#[cfg(test)]
mod tests;
