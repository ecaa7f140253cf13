//! DaemonSet `nvidia-mig-manager`: privileged, in the host's PID and IPC namespaces, behind the
//! toolkit barrier; the layouts ConfigMap mounted at `/mig-parted-config` (the user's as
//! `config.yaml` with `CONFIG_FILE`, else the default as `config-default.yaml` with
//! `DEFAULT_CONFIG_FILE`, a fallback for when the manager cannot derive layouts from the
//! hardware), the GPU clients at `/gpu-clients`, the host root, `/sys`, the driver and CDI dirs.

use gpu_operator_api::labels::operand;
use gpu_operator_core::{
    build::{
        daemonset::{self, Identity},
        pod::{self, Finish, Gpus, Wrap, host_path, mount},
    },
    contract::Operand as _,
};
use k8s_openapi::api::{
    apps::v1::DaemonSet,
    core::v1::{ConfigMapVolumeSource, Container, EnvVar, KeyToPath, PodSpec, Volume, VolumeMount},
};

use crate::{
    CUSTOM_CONFIG, DEFAULT_CONFIG, DEFAULT_GPU_CLIENTS, ENTRYPOINT, Input, MigManager, NAME,
};

/// Where the layouts ConfigMap is mounted.
const CONFIG_DIR: &str = "/mig-parted-config";

/// The DaemonSet.
pub fn build(input: &Input) -> DaemonSet {
    let pod = PodSpec {
        service_account_name: Some(NAME.to_owned()),
        host_pid: Some(true),
        host_ipc: Some(true),
        containers: vec![Container {
            name: NAME.to_owned(),
            image: Some(input.image.clone()),
            command: Some(vec!["/bin/sh".to_owned(), "-c".to_owned()]),
            args: Some(match input.component.args.as_slice() {
                [] => vec!["/bin/entrypoint.sh".to_owned()],
                user => user.to_vec(),
            }),
            env: Some(daemonset::override_env(env(input), &input.component.env)),
            security_context: Some(pod::privileged()),
            volume_mounts: Some(mounts()),
            ..Container::default()
        }],
        volumes: Some(volumes(input)),
        ..PodSpec::default()
    };
    let steps = Finish {
        component: &input.component,
        barrier: input.shared.after_toolkit(&input.validator_image),
        host_paths: input.shared.rewrite_host_paths(),
        // The args replace the entrypoint above, which is the default when none are set.
        args: None,
    };
    pod::finish(pod, steps).into_daemonset(Wrap {
        identity: Identity {
            name: NAME,
            component: MigManager::NAME,
            deploy_label: operand::MIG_MANAGER,
            always_on_delete: false,
        },
        daemonsets: &input.shared.daemonsets,
        gpus: Some(Gpus {
            access: &input.gpu_access,
            container: NAME,
        }),
    })
}

/// The operator's env of the container (the user's is merged over it).
fn env(input: &Input) -> Vec<EnvVar> {
    let mut env = vec![
        daemonset::field_env("NODE_NAME", "spec.nodeName"),
        daemonset::field_env("POD_NAME", "metadata.name"),
        daemonset::field_env("POD_NAMESPACE", "metadata.namespace"),
        literal("GPU_CLIENTS_FILE", "/gpu-clients/clients.yaml"),
        daemonset::field_env("DEFAULT_GPU_CLIENTS_NAMESPACE", "metadata.namespace"),
    ];
    if input.custom.is_some() {
        env.push(literal("CONFIG_FILE", &format!("{CONFIG_DIR}/config.yaml")));
    } else {
        env.push(literal(
            "DEFAULT_CONFIG_FILE",
            &format!("{CONFIG_DIR}/config-default.yaml"),
        ));
    }
    if input.cdi_enabled {
        env.push(literal("CDI_ENABLED", "true"));
    }
    if let Some(hook) = &input.cdi_hook_path {
        env.push(literal("NVIDIA_CDI_HOOK_PATH", hook));
    }
    env
}

fn mounts() -> Vec<VolumeMount> {
    vec![
        VolumeMount {
            read_only: Some(true),
            sub_path: Some("entrypoint.sh".to_owned()),
            ..mount(ENTRYPOINT, "/bin/entrypoint.sh")
        },
        mount("run-nvidia-validations", "/run/nvidia/validations"),
        mount("host-sys", "/sys"),
        propagated(mount("host-root", "/host")),
        mount("gpu-clients", "/gpu-clients"),
        mount("mig-parted-config", CONFIG_DIR),
        propagated(mount("driver-install-dir", "/driver-root")),
        mount("cdi-root", "/var/run/cdi"),
    ]
}

fn volumes(input: &Input) -> Vec<Volume> {
    // The default layouts are mounted as `config-default.yaml`, telling the manager they are a
    // fallback; a user's as they are.
    let layouts = if input.custom.is_some() {
        config_map_volume("mig-parted-config", CUSTOM_CONFIG, None)
    } else {
        let remap = KeyToPath {
            key: "config.yaml".to_owned(),
            path: "config-default.yaml".to_owned(),
            mode: None,
        };
        config_map_volume("mig-parted-config", DEFAULT_CONFIG, Some(vec![remap]))
    };
    let gpu_clients = input
        .custom_gpu_clients
        .clone()
        .unwrap_or_else(|| DEFAULT_GPU_CLIENTS.to_owned());
    vec![
        Volume {
            config_map: Some(ConfigMapVolumeSource {
                name: ENTRYPOINT.to_owned(),
                default_mode: Some(0o700),
                ..ConfigMapVolumeSource::default()
            }),
            ..volume(ENTRYPOINT)
        },
        host_path("host-sys", "/sys", Some("Directory")),
        host_path(
            "driver-install-dir",
            "/run/nvidia/driver",
            Some("DirectoryOrCreate"),
        ),
        host_path("host-root", "/", None),
        config_map_volume("gpu-clients", &gpu_clients, None),
        layouts,
        host_path("cdi-root", "/var/run/cdi", Some("DirectoryOrCreate")),
    ]
}

fn literal(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value: Some(value.to_owned()),
        value_from: None,
    }
}

fn propagated(mount: VolumeMount) -> VolumeMount {
    VolumeMount {
        mount_propagation: Some("HostToContainer".to_owned()),
        ..mount
    }
}

fn volume(name: &str) -> Volume {
    Volume {
        name: name.to_owned(),
        ..Volume::default()
    }
}

fn config_map_volume(name: &str, config_map: &str, items: Option<Vec<KeyToPath>>) -> Volume {
    Volume {
        config_map: Some(ConfigMapVolumeSource {
            name: config_map.to_owned(),
            items,
            ..ConfigMapVolumeSource::default()
        }),
        ..volume(name)
    }
}

#[cfg(test)]
mod tests {
    use gpu_operator_api::{
        ClusterPolicySpec,
        spec::{EnvVar as SpecEnv, MigManagerSpec, MigPartedConfigSpec},
    };

    use super::*;

    fn render(section: MigManagerSpec) -> PodSpec {
        let spec = ClusterPolicySpec {
            mig_manager: Some(section),
            ..ClusterPolicySpec::default()
        };
        let ds = build(&crate::validate::for_tests(&spec));
        ds.spec.unwrap().template.spec.unwrap()
    }

    fn env(pod: &PodSpec, name: &str) -> Option<String> {
        let env = pod.containers[0].env.as_ref().unwrap();
        env.iter()
            .find(|e| e.name == name)
            .map(|e| e.value.clone().unwrap_or_default())
    }

    fn layouts_volume(pod: &PodSpec) -> ConfigMapVolumeSource {
        let volumes = pod.volumes.as_ref().unwrap();
        let volume = volumes
            .iter()
            .find(|v| v.name == "mig-parted-config")
            .unwrap();
        volume.config_map.clone().unwrap()
    }

    #[test]
    fn privileged_in_the_host_pid_and_ipc_namespaces_on_mig_capable_nodes() {
        let pod = render(MigManagerSpec::default());
        assert_eq!((pod.host_pid, pod.host_ipc), (Some(true), Some(true)));
        let privileged = pod.containers[0]
            .security_context
            .as_ref()
            .unwrap()
            .privileged;
        assert_eq!(privileged, Some(true));
        assert_eq!(
            pod.node_selector.unwrap()["nvidia.com/gpu.deploy.mig-manager"],
            "true"
        );
        assert_eq!(pod.init_containers.unwrap()[0].name, "toolkit-validation");
    }

    #[test]
    fn the_default_layouts_are_a_fallback_file_and_a_users_config_is_the_config_file() {
        let pod = render(MigManagerSpec::default());
        assert_eq!(
            env(&pod, "DEFAULT_CONFIG_FILE").as_deref(),
            Some("/mig-parted-config/config-default.yaml")
        );
        assert_eq!(env(&pod, "CONFIG_FILE"), None);
        let volume = layouts_volume(&pod);
        assert_eq!(volume.name, DEFAULT_CONFIG);
        assert_eq!(volume.items.unwrap()[0].path, "config-default.yaml");

        let pod = render(MigManagerSpec {
            config: Some(MigPartedConfigSpec {
                name: Some("my-layouts".into()),
                default: None,
            }),
            ..MigManagerSpec::default()
        });
        assert_eq!(
            env(&pod, "CONFIG_FILE").as_deref(),
            Some("/mig-parted-config/config.yaml")
        );
        assert_eq!(env(&pod, "DEFAULT_CONFIG_FILE"), None);
        let volume = layouts_volume(&pod);
        assert_eq!(
            (volume.name.as_str(), volume.items),
            (crate::CUSTOM_CONFIG, None)
        );
    }

    #[test]
    fn with_reboot_and_other_user_env_pass_through() {
        let mut section = MigManagerSpec::default();
        section.container.env = Some(vec![SpecEnv::new("WITH_REBOOT", "true")]);
        let pod = render(section);
        assert_eq!(env(&pod, "WITH_REBOOT").as_deref(), Some("true"));
        assert_eq!(env(&pod, "CDI_ENABLED").as_deref(), Some("true"));
        assert_eq!(
            env(&pod, "GPU_CLIENTS_FILE").as_deref(),
            Some("/gpu-clients/clients.yaml")
        );
    }
}
