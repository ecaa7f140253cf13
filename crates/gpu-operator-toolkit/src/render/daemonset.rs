//! `nvidia-container-toolkit-daemonset`: the `driver-validation` init container (the barrier on
//! the driver), then `nvidia-container-toolkit-ctr` with NVIDIA's env (install dir, CDI mode, the
//! CRI-O hook fallback), the user's `toolkit.env` over it, and the runtime wiring (which reads the
//! user's host paths). Runs without a RuntimeClass: it installs the runtime the others use.

use gpu_operator_api::labels::operand;
use gpu_operator_core::{
    build::{
        barrier,
        daemonset::{self, Identity, merge_env},
        image,
        pod::{self, Barrier, Finish, HostPaths, Wrap, mount},
        runtime_class::ContainerRuntime,
        shared::Shared,
    },
    contract::Operand as _,
};
use k8s_openapi::api::{
    apps::v1::DaemonSet,
    core::v1::{
        ConfigMapVolumeSource, Container, EnvVar, LocalObjectReference, PodSpec, SELinuxOptions,
        SecurityContext, Volume, VolumeMount,
    },
};

use super::config_map::SCRIPT_KEY;
use crate::{DAEMONSET, ENTRYPOINT_CONFIG_MAP, Input, SERVICE_ACCOUNT, Toolkit, runtime};

const CONTAINER: &str = "nvidia-container-toolkit-ctr";

/// The operator's env before the user's.
fn defaults(input: &Input) -> Vec<(&'static str, String)> {
    let settings = &input.runtime_settings;
    let mut env = vec![
        ("ROOT", input.install_dir.clone()),
        (
            "NVIDIA_CONTAINER_RUNTIME_MODES_CDI_DEFAULT_KIND",
            "management.nvidia.com/gpu".to_owned(),
        ),
        ("NVIDIA_VISIBLE_DEVICES", "void".to_owned()),
        (
            "TOOLKIT_PID_FILE",
            "/run/nvidia/toolkit/toolkit.pid".to_owned(),
        ),
    ];
    if settings.cdi_enabled {
        env.extend([
            ("CDI_ENABLED", "true".to_owned()),
            ("NVIDIA_RUNTIME_SET_AS_DEFAULT", "false".to_owned()),
            ("NVIDIA_CONTAINER_RUNTIME_MODE", "cdi".to_owned()),
            ("CRIO_CONFIG_MODE", "config".to_owned()),
        ]);
        if settings.nri_plugin_enabled {
            env.push(("ENABLE_NRI_PLUGIN", "true".to_owned()));
        }
    } else if input.runtime == ContainerRuntime::CriO {
        // Without CDI, CRI-O gets the OCI prestart hook rather than a runtime handler.
        env.push(("CRIO_CONFIG_MODE", "hook".to_owned()));
    }
    env
}

/// The toolkit container's env: NVIDIA's, the user's over it, then the runtime wiring.
fn env(input: &Input, wiring: &runtime::Wiring) -> Vec<EnvVar> {
    let mut env = merge_env(&defaults(input), &input.component.env);
    for (name, value) in &wiring.env {
        env.retain(|e| e.name != *name);
        env.push(EnvVar {
            name: (*name).to_owned(),
            value: Some(value.clone()),
            value_from: None,
        });
    }
    env.push(daemonset::field_env("NRI_NAMESPACE", "metadata.namespace"));
    env
}

/// A hostPath volume, created as a directory when missing if `create`.
fn host_path(name: &str, path: &str, create: bool) -> Volume {
    pod::host_path(name, path, create.then_some("DirectoryOrCreate"))
}

/// The DaemonSet.
pub fn build(input: &Input) -> DaemonSet {
    let wiring = runtime::wiring(
        input.runtime,
        &input.component.env,
        &input.runtime_settings.configured_name,
        input.runtime_settings.nri_plugin_enabled,
    );
    let install_dir = input.install_dir.as_str();
    let mut mounts = vec![
        VolumeMount {
            read_only: Some(true),
            sub_path: Some(SCRIPT_KEY.to_owned()),
            ..mount(ENTRYPOINT_CONFIG_MAP, "/bin/entrypoint.sh")
        },
        mount("toolkit-root", "/run/nvidia/toolkit"),
        mount(barrier::VALIDATIONS_VOLUME, barrier::VALIDATIONS_DIR),
        mount("toolkit-install-dir", install_dir),
        mount("crio-hooks", "/usr/share/containers/oci/hooks.d"),
        VolumeMount {
            mount_propagation: Some("HostToContainer".to_owned()),
            ..mount("driver-install-dir", "/driver-root")
        },
        VolumeMount {
            read_only: Some(true),
            mount_propagation: Some("HostToContainer".to_owned()),
            ..mount("host-root", "/host")
        },
        mount("cdi-root", "/var/run/cdi"),
    ];
    mounts.extend(wiring.mounts.iter().cloned());
    let mut volumes = volumes(input, install_dir);
    volumes.extend(wiring.volumes.iter().cloned());
    let main = Container {
        name: CONTAINER.to_owned(),
        image: Some(input.image.clone()),
        command: Some(vec!["/bin/sh".to_owned(), "-c".to_owned()]),
        args: Some(vec!["/bin/entrypoint.sh".to_owned()]),
        env: Some(env(input, &wiring)),
        security_context: Some(SecurityContext {
            se_linux_options: Some(SELinuxOptions {
                level: Some("s0".to_owned()),
                ..SELinuxOptions::default()
            }),
            ..pod::privileged()
        }),
        volume_mounts: Some(mounts),
        ..Container::default()
    };
    let pod = PodSpec {
        service_account_name: Some(SERVICE_ACCOUNT.to_owned()),
        host_pid: Some(true),
        init_containers: Some(vec![driver_validation(input)]),
        containers: vec![main],
        volumes: Some(volumes),
        ..PodSpec::default()
    };
    let steps = Finish {
        component: &input.component,
        // Its `driver-validation` barrier is in the pod; the validator image's pull settings
        // reach it below (its resources stay the toolkit's).
        barrier: Barrier::None,
        host_paths: HostPaths::ResolvedByOperand,
        // The entrypoint above runs the toolkit; `toolkit.args` are not passed to it.
        args: None,
    };
    let mut finished = pod::finish(pod, steps);
    validator_image_settings(&input.shared, finished.pod_mut());
    finished.into_daemonset(Wrap {
        identity: Identity {
            name: DAEMONSET,
            component: Toolkit::NAME,
            deploy_label: operand::CONTAINER_TOOLKIT,
            always_on_delete: false,
        },
        daemonsets: &input.shared.daemonsets,
        gpus: None,
    })
}

/// The pod's volumes before the runtime wiring's: host paths with `hostPaths.rootFS`,
/// `hostPaths.driverInstallDir` and `toolkit.installDir` applied, and the entrypoint.
fn volumes(input: &Input, install_dir: &str) -> Vec<Volume> {
    let root = input.shared.root_fs();
    let driver_dir = input.shared.driver_install_dir();
    let hooks = if input.runtime == ContainerRuntime::CriO {
        "/usr/share/containers/oci/hooks.d"
    } else {
        "/run/containers/oci/hooks.d"
    };
    vec![
        Volume {
            name: ENTRYPOINT_CONFIG_MAP.to_owned(),
            config_map: Some(ConfigMapVolumeSource {
                name: ENTRYPOINT_CONFIG_MAP.to_owned(),
                default_mode: Some(0o700),
                ..ConfigMapVolumeSource::default()
            }),
            ..Volume::default()
        },
        host_path("toolkit-root", "/run/nvidia/toolkit", true),
        barrier::volume(),
        host_path("driver-install-dir", driver_dir, true),
        host_path("host-root", root, false),
        host_path("toolkit-install-dir", install_dir, false),
        host_path("crio-hooks", hooks, false),
        host_path(
            "host-dev-char",
            &format!("{}/dev/char", root.trim_end_matches('/')),
            false,
        ),
        host_path("cdi-root", "/var/run/cdi", true),
    ]
}

/// The barrier: wait for the validator's `driver-ready`, with `validator.driver.env`.
fn driver_validation(input: &Input) -> Container {
    let mut init = barrier::wait_for("driver", &input.validator_image);
    let user = input
        .shared
        .validator
        .as_ref()
        .and_then(|v| v.driver.as_ref())
        .and_then(|d| d.env.as_deref())
        .unwrap_or_default();
    if !user.is_empty() {
        init.env = Some(merge_env(&[], user));
    }
    init
}

/// The init container runs the validator image: its pull policy and pull secrets apply to it.
fn validator_image_settings(shared: &Shared, pod: &mut PodSpec) {
    let validator = shared.validator.clone().unwrap_or_default();
    if validator.image.pull_policy().is_some() {
        for init in pod.init_containers.iter_mut().flatten() {
            init.image_pull_policy = Some(image::pull_policy(&validator.image).to_owned());
        }
    }
    let secrets = pod.image_pull_secrets.get_or_insert_with(Vec::new);
    for secret in validator.image.pull_secrets() {
        if !secrets.iter().any(|s| &s.name == secret) {
            secrets.push(LocalObjectReference {
                name: secret.clone(),
            });
        }
    }
    if secrets.is_empty() {
        pod.image_pull_secrets = None;
    }
}

#[cfg(test)]
mod tests;
