//! The device plugin configuration flow (`devicePlugin.config`), shared by the device plugin, the
//! MPS control daemon and GPU Feature Discovery, with NVIDIA's names: the ConfigMap of
//! configurations mounted at `/available-configs`, an emptyDir at `/config`, the
//! `config-manager-init` init container (picks the node's configuration once, before the main
//! container starts) and the `config-manager` sidecar (follows the node's
//! `nvidia.com/device-plugin.config` label and signals the main process with SIGHUP), both
//! running the device plugin image's `config-manager`, and a shared process namespace so the
//! sidecar can signal. Without `devicePlugin.config.name` nothing is added.
//!
//! Unlike NVIDIA's, the mounted ConfigMap is the operand's checked copy of the user's (see
//! [`gpu_operator_core::build::user_config`]): each key is checked as a device plugin configuration
//! first, and the pods carry a digest of the copy, so an edit that passes rolls them (the config
//! manager follows only the node label, so NVIDIA's keep the old configuration until restarted by
//! hand).

use gpu_operator_api::{ClusterPolicySpec, labels::DEVICE_PLUGIN_CONFIG};
use k8s_openapi::api::{
    apps::v1::DaemonSet,
    core::v1::{
        ConfigMapVolumeSource, Container, EmptyDirVolumeSource, EnvVar, PodSpec, Volume,
        VolumeMount,
    },
};

use gpu_operator_core::{
    Error,
    build::{
        daemonset::{self, field_env},
        pod::mount,
        user_config::{self, Checked, Source},
    },
    contract::Cluster,
};

use crate::checker;

/// Pod-template annotation with the digest of the mounted configurations.
pub const DIGEST_ANNOTATION: &str = "nvidia.com/device-plugin.config-digest";

/// Where the ConfigMap of configurations is mounted.
pub const AVAILABLE_CONFIGS_DIR: &str = "/available-configs";
/// The shared directory the config manager writes the node's configuration into.
pub const CONFIG_DIR: &str = "/config";
/// The node's configuration, as the main container reads it (`CONFIG_FILE`).
pub const CONFIG_FILE: &str = "/config/config.yaml";
/// Volume of the ConfigMap of configurations.
const AVAILABLE_CONFIGS_VOLUME: &str = "available-configs";
/// Volume of [`CONFIG_DIR`].
const CONFIG_VOLUME: &str = "config";

/// How one operand runs the config manager.
#[derive(Clone, Copy, Debug)]
pub struct Wiring<'a> {
    /// The main container that reads `CONFIG_FILE`, such as `nvidia-device-plugin`.
    pub main_container: &'a str,
    /// The process the sidecar signals, such as `nvidia-device-plugin`.
    pub process_to_signal: &'a str,
    /// The device plugin image, which carries `config-manager`.
    pub image: &'a str,
}

/// The configurations an operand mounts: its checked copy of the user's ConfigMap.
#[derive(Clone, Copy, Debug)]
pub struct Configs<'a> {
    /// The copy's name.
    pub config_map: &'a str,
    /// `devicePlugin.config.default`, the configuration of nodes without the label.
    pub default: &'a str,
}

/// `devicePlugin.config.default` of `spec`, empty when unset: the configuration of nodes
/// without the config label.
pub fn default_config(spec: &ClusterPolicySpec) -> String {
    spec.device_plugin
        .config
        .as_ref()
        .and_then(|c| c.default.clone())
        .unwrap_or_default()
}

/// Checks the ConfigMap `devicePlugin.config.name` names, each key as a device plugin
/// configuration and `devicePlugin.config.default` as one of its keys, into the copy named
/// `copy`. `Ok(None)` without `devicePlugin.config.name`.
pub fn check(
    spec: &ClusterPolicySpec,
    cluster: &Cluster<'_>,
    copy: &str,
) -> Result<Option<Checked>, Error> {
    let Some(config) = spec.device_plugin.config.as_ref() else {
        return Ok(None);
    };
    let Some(name) = config.name.as_deref().filter(|n| !n.is_empty()) else {
        return Ok(None);
    };
    let source = Source {
        field: "devicePlugin.config.name",
        name,
        required_key: config.default.as_deref().filter(|d| !d.is_empty()).map(|d| {
            (
                d,
                "devicePlugin.config.default names it: add it or change devicePlugin.config.default",
            )
        }),
    };
    let check = |_: &str, text: &str| {
        let found = checker::check(text);
        if found.errors.is_empty() {
            Ok(found.warnings.iter().map(ToString::to_string).collect())
        } else {
            Err(found
                .errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "))
        }
    };
    user_config::check(cluster.namespace, cluster.config_maps, source, copy, &check).map(Some)
}

/// Annotates the pods of `daemonset` with the digest of `checked`, so they roll when it changes.
pub fn annotate(daemonset: &mut DaemonSet, checked: &Checked) {
    daemonset::annotate_pods(
        daemonset,
        DIGEST_ANNOTATION.to_owned(),
        checked.digest.clone(),
    );
}

/// Adds the config manager to `pod` when there are `configs`. Call it before the component's
/// settings (the component step of `gpu_operator_core::build::pod::finish`), which then reach its
/// containers too.
pub fn apply(pod: &mut PodSpec, wiring: Wiring<'_>, configs: Option<Configs<'_>>) {
    let Some(Configs {
        config_map: name,
        default,
    }) = configs
    else {
        return;
    };
    if let Some(main) = pod
        .containers
        .iter_mut()
        .find(|c| c.name == wiring.main_container)
    {
        let env = main.env.get_or_insert_with(Vec::new);
        if !env.iter().any(|e| e.name == "CONFIG_FILE") {
            env.push(value("CONFIG_FILE", CONFIG_FILE));
        }
        main.volume_mounts
            .get_or_insert_with(Vec::new)
            .extend(mounts());
    }
    pod.init_containers
        .get_or_insert_with(Vec::new)
        .push(container("config-manager-init", &wiring, default, None));
    pod.containers.push(container(
        "config-manager",
        &wiring,
        default,
        Some(wiring.process_to_signal),
    ));
    if pod.host_pid != Some(true) {
        pod.share_process_namespace = Some(true);
    }
    pod.volumes.get_or_insert_with(Vec::new).extend([
        Volume {
            name: AVAILABLE_CONFIGS_VOLUME.to_owned(),
            config_map: Some(ConfigMapVolumeSource {
                name: name.to_owned(),
                ..ConfigMapVolumeSource::default()
            }),
            ..Volume::default()
        },
        Volume {
            name: CONFIG_VOLUME.to_owned(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Volume::default()
        },
    ]);
}

/// `config-manager-init` (no `signal`: runs once) or the `config-manager` sidecar.
fn container(name: &str, wiring: &Wiring<'_>, default: &str, signal: Option<&str>) -> Container {
    let env = vec![
        value("ONESHOT", if signal.is_some() { "false" } else { "true" }),
        value("KUBECONFIG", ""),
        field_env("NODE_NAME", "spec.nodeName"),
        value("NODE_LABEL", DEVICE_PLUGIN_CONFIG),
        value("CONFIG_FILE_SRCDIR", AVAILABLE_CONFIGS_DIR),
        value("CONFIG_FILE_DST", CONFIG_FILE),
        value("DEFAULT_CONFIG", default),
        value("FALLBACK_STRATEGIES", "empty"),
        value(
            "SEND_SIGNAL",
            if signal.is_some() { "true" } else { "false" },
        ),
        value("SIGNAL", if signal.is_some() { "1" } else { "" }),
        value("PROCESS_TO_SIGNAL", signal.unwrap_or_default()),
    ];
    Container {
        name: name.to_owned(),
        image: Some(wiring.image.to_owned()),
        command: Some(vec!["config-manager".to_owned()]),
        env: Some(env),
        security_context: signal.map(|_| gpu_operator_core::build::pod::privileged()),
        volume_mounts: Some(mounts().to_vec()),
        ..Container::default()
    }
}

fn mounts() -> [VolumeMount; 2] {
    [
        mount(CONFIG_VOLUME, CONFIG_DIR),
        mount(AVAILABLE_CONFIGS_VOLUME, AVAILABLE_CONFIGS_DIR),
    ]
}

/// A literal env variable. An empty value is left out, as the API server stores it (`value` is
/// `omitempty`), so the rendered container compares equal to the live one.
fn value(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value: Some(value.to_owned()).filter(|v| !v.is_empty()),
        value_from: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WIRING: Wiring<'static> = Wiring {
        main_container: "main",
        process_to_signal: "main-process",
        image: "plugin:1",
    };

    fn pod() -> PodSpec {
        PodSpec {
            containers: vec![Container {
                name: "main".into(),
                ..Container::default()
            }],
            ..PodSpec::default()
        }
    }

    fn env(c: &Container, name: &str) -> Option<String> {
        c.env
            .iter()
            .flatten()
            .find(|e| e.name == name)
            .and_then(|e| e.value.clone())
    }

    #[test]
    fn without_configs_nothing_is_added() {
        let mut plain = pod();
        apply(&mut plain, WIRING, None);
        assert_eq!(plain, pod());
    }

    #[test]
    fn a_config_adds_init_and_sidecar_with_nvidias_env_volumes_and_process_sharing() {
        let mut pod = pod();
        let configs = Configs {
            config_map: "nvidia-device-plugin-configs",
            default: "any",
        };
        apply(&mut pod, WIRING, Some(configs));
        let init = &pod.init_containers.as_ref().unwrap()[0];
        assert_eq!(init.name, "config-manager-init");
        assert_eq!(
            init.command.as_deref(),
            Some(&["config-manager".to_owned()][..])
        );
        assert_eq!(env(init, "ONESHOT").as_deref(), Some("true"));
        assert_eq!(env(init, "SEND_SIGNAL").as_deref(), Some("false"));
        assert_eq!(env(init, "DEFAULT_CONFIG").as_deref(), Some("any"));
        assert_eq!(env(init, "FALLBACK_STRATEGIES").as_deref(), Some("empty"));
        assert_eq!(
            env(init, "NODE_LABEL").as_deref(),
            Some("nvidia.com/device-plugin.config")
        );
        let sidecar = &pod.containers[1];
        assert_eq!(sidecar.name, "config-manager");
        assert_eq!(env(sidecar, "ONESHOT").as_deref(), Some("false"));
        assert_eq!(env(sidecar, "SIGNAL").as_deref(), Some("1"));
        assert_eq!(
            env(sidecar, "PROCESS_TO_SIGNAL").as_deref(),
            Some("main-process")
        );
        assert_eq!(
            env(&pod.containers[0], "CONFIG_FILE").as_deref(),
            Some(CONFIG_FILE)
        );
        assert_eq!(pod.share_process_namespace, Some(true));
        let volumes = pod.volumes.unwrap();
        assert_eq!(
            volumes[0].config_map.as_ref().unwrap().name,
            "nvidia-device-plugin-configs"
        );
        assert!(volumes[1].empty_dir.is_some());
    }

    #[test]
    fn host_pid_pods_share_processes_already_and_user_config_file_wins() {
        let mut pod = pod();
        pod.host_pid = Some(true);
        pod.containers[0].env = Some(vec![value("CONFIG_FILE", "/mine.yaml")]);
        let configs = Configs {
            config_map: "c",
            default: "",
        };
        apply(&mut pod, WIRING, Some(configs));
        assert_eq!(pod.share_process_namespace, None);
        assert_eq!(
            env(&pod.containers[0], "CONFIG_FILE").as_deref(),
            Some("/mine.yaml")
        );
        assert_eq!(env(&pod.containers[1], "DEFAULT_CONFIG").as_deref(), None);
    }

    /// The API server drops an empty `value` on read; rendering one makes every reconcile see a
    /// difference and re-apply the DaemonSet (NVIDIA's empty `KUBECONFIG`, `SIGNAL` and
    /// `PROCESS_TO_SIGNAL` of the one-shot init container, and an empty `DEFAULT_CONFIG`).
    #[test]
    fn no_env_value_is_rendered_empty_but_every_variable_is_kept() {
        let mut pod = pod();
        let configs = Configs {
            config_map: "c",
            default: "",
        };
        apply(&mut pod, WIRING, Some(configs));
        let init = &pod.init_containers.as_ref().unwrap()[0];
        for c in [init, &pod.containers[1]] {
            for e in c.env.iter().flatten() {
                assert_ne!(e.value.as_deref(), Some(""), "{}: {}", c.name, e.name);
            }
        }
        let names: Vec<&str> = init.env.iter().flatten().map(|e| e.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "ONESHOT",
                "KUBECONFIG",
                "NODE_NAME",
                "NODE_LABEL",
                "CONFIG_FILE_SRCDIR",
                "CONFIG_FILE_DST",
                "DEFAULT_CONFIG",
                "FALLBACK_STRATEGIES",
                "SEND_SIGNAL",
                "SIGNAL",
                "PROCESS_TO_SIGNAL"
            ],
            "NVIDIA's variables, in NVIDIA's order"
        );
        assert_eq!(env(init, "SIGNAL"), None);
        assert_eq!(env(init, "PROCESS_TO_SIGNAL"), None);
        assert_eq!(env(init, "KUBECONFIG"), None);
    }
}
