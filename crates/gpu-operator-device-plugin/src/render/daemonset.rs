//! `nvidia-device-plugin-daemonset`: the device plugin container with its MIG strategy and
//! CDI settings, and the host paths it needs.

use gpu_operator_api::{labels::operand, spec::MigStrategy};
use gpu_operator_core::{
    daemonset::{self, Identity},
    operand::Operand as _,
};
use k8s_openapi::api::{
    apps::v1::DaemonSet,
    core::v1::{Container, HostPathVolumeSource, PodSpec, SecurityContext, Volume, VolumeMount},
};

use crate::{DAEMONSET, DevicePlugin, Input, SERVICE_ACCOUNT};

/// Host paths the plugin mounts: (volume name, host path, mount path).
const HOST_PATHS: [(&str, &str, &str); 4] = [
    (
        "device-plugin",
        "/var/lib/kubelet/device-plugins",
        "/var/lib/kubelet/device-plugins",
    ),
    (
        "run-nvidia-validations",
        "/run/nvidia/validations",
        "/run/nvidia/validations",
    ),
    ("driver-install-dir", "/run/nvidia/driver", "/driver-root"),
    ("cdi-root", "/var/run/cdi", "/var/run/cdi"),
];

/// The DaemonSet.
pub fn build(input: &Input) -> DaemonSet {
    let spec = &input.spec;
    let plugin = &spec.device_plugin;
    let mut pod = PodSpec {
        service_account_name: Some(SERVICE_ACCOUNT.to_owned()),
        containers: vec![Container {
            name: "nvidia-device-plugin".to_owned(),
            image: Some(input.image.clone()),
            args: Some(plugin.container.args().to_vec()).filter(|a| !a.is_empty()),
            env: Some(daemonset::merge_env(&env(input), plugin.container.env())),
            security_context: Some(SecurityContext {
                privileged: Some(true),
                ..SecurityContext::default()
            }),
            volume_mounts: Some(
                HOST_PATHS
                    .iter()
                    .map(|(name, _, path)| VolumeMount {
                        name: (*name).to_owned(),
                        mount_path: (*path).to_owned(),
                        ..VolumeMount::default()
                    })
                    .collect(),
            ),
            ..Container::default()
        }],
        volumes: Some(
            HOST_PATHS
                .iter()
                .map(|(name, host, _)| Volume {
                    name: (*name).to_owned(),
                    host_path: Some(HostPathVolumeSource {
                        path: (*host).to_owned(),
                        type_: None,
                    }),
                    ..Volume::default()
                })
                .collect(),
        ),
        ..PodSpec::default()
    };
    daemonset::apply_component(
        &mut pod,
        &plugin.image,
        &plugin.container,
        plugin.host_network,
    );
    let id = Identity {
        name: DAEMONSET,
        component: DevicePlugin::NAME,
        deploy_label: operand::DEVICE_PLUGIN,
        always_on_delete: false,
    };
    daemonset::build(id, pod, &spec.daemonsets)
}

/// The operator's env of the plugin container (the user's env is merged over it).
fn env(input: &Input) -> Vec<(&'static str, String)> {
    let spec = &input.spec;
    let mut env = vec![
        ("PASS_DEVICE_SPECS", "true".to_owned()),
        ("FAIL_ON_INIT_ERROR", "true".to_owned()),
        ("DEVICE_ID_STRATEGY", "uuid".to_owned()),
        ("NVIDIA_VISIBLE_DEVICES", "all".to_owned()),
        ("NVIDIA_DRIVER_CAPABILITIES", "all".to_owned()),
    ];
    match spec.mig.as_ref().and_then(|m| m.strategy) {
        None => env.push(("NVIDIA_MIG_MONITOR_DEVICES", "all".to_owned())),
        Some(strategy) => {
            env.push(("MIG_STRATEGY", strategy.as_str().to_owned()));
            if strategy != MigStrategy::None {
                env.push(("NVIDIA_MIG_MONITOR_DEVICES", "all".to_owned()));
            }
        }
    }
    let cdi = spec.cdi.as_ref().and_then(|c| c.enabled).unwrap_or(true);
    if cdi {
        let install_dir = spec
            .toolkit
            .install_dir
            .clone()
            .unwrap_or_else(|| "/usr/local/nvidia".to_owned());
        env.extend([
            ("CDI_ENABLED", "true".to_owned()),
            ("DEVICE_LIST_STRATEGY", "cdi-annotations,cdi-cri".to_owned()),
            ("CDI_ANNOTATION_PREFIX", "cdi.k8s.io/".to_owned()),
            (
                "NVIDIA_CDI_HOOK_PATH",
                format!("{install_dir}/toolkit/nvidia-cdi-hook"),
            ),
        ]);
    } else {
        env.push(("DEVICE_LIST_STRATEGY", "envvar".to_owned()));
    }
    env
}

#[cfg(test)]
mod tests {
    use gpu_operator_api::{
        ClusterPolicySpec,
        spec::{EnvVar, MigSpec},
    };

    use super::*;

    fn render(spec: ClusterPolicySpec) -> DaemonSet {
        build(&Input {
            image: "nvcr.io/nvidia/k8s-device-plugin:v0.17.0".into(),
            spec,
        })
    }

    fn env_of(ds: &DaemonSet) -> Vec<(String, String)> {
        let pod = ds.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
        pod.containers[0]
            .env
            .clone()
            .unwrap()
            .into_iter()
            .map(|e| (e.name, e.value.unwrap_or_default()))
            .collect()
    }

    fn value(ds: &DaemonSet, name: &str) -> Option<String> {
        env_of(ds)
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
    }

    #[test]
    fn names_selector_and_image_follow_nvidia() {
        let ds = render(ClusterPolicySpec::default());
        assert_eq!(ds.metadata.name.as_deref(), Some(DAEMONSET));
        let pod = ds.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
        assert_eq!(
            pod.node_selector.as_ref().unwrap()["nvidia.com/gpu.deploy.device-plugin"],
            "true"
        );
        assert_eq!(pod.service_account_name.as_deref(), Some(SERVICE_ACCOUNT));
        assert_eq!(
            pod.containers[0].image.as_deref(),
            Some("nvcr.io/nvidia/k8s-device-plugin:v0.17.0")
        );
        assert_eq!(ds.metadata.labels.as_ref().unwrap()["app"], DAEMONSET);
    }

    #[test]
    fn mig_strategy_env_follows_nvidia() {
        assert_eq!(
            value(&render(ClusterPolicySpec::default()), "MIG_STRATEGY"),
            None
        );
        assert_eq!(
            value(
                &render(ClusterPolicySpec::default()),
                "NVIDIA_MIG_MONITOR_DEVICES"
            )
            .as_deref(),
            Some("all")
        );
        let mixed = ClusterPolicySpec {
            mig: Some(MigSpec {
                strategy: Some(MigStrategy::Mixed),
            }),
            ..ClusterPolicySpec::default()
        };
        assert_eq!(
            value(&render(mixed), "MIG_STRATEGY").as_deref(),
            Some("mixed")
        );
        let none = ClusterPolicySpec {
            mig: Some(MigSpec {
                strategy: Some(MigStrategy::None),
            }),
            ..ClusterPolicySpec::default()
        };
        let none = render(none);
        assert_eq!(value(&none, "MIG_STRATEGY").as_deref(), Some("none"));
        assert_eq!(value(&none, "NVIDIA_MIG_MONITOR_DEVICES"), None);
    }

    #[test]
    fn cdi_is_on_by_default_and_user_env_wins() {
        let mut spec = ClusterPolicySpec::default();
        spec.device_plugin.container.env = Some(vec![EnvVar::new("DEVICE_ID_STRATEGY", "index")]);
        let ds = render(spec);
        assert_eq!(value(&ds, "CDI_ENABLED").as_deref(), Some("true"));
        assert_eq!(
            value(&ds, "NVIDIA_CDI_HOOK_PATH").as_deref(),
            Some("/usr/local/nvidia/toolkit/nvidia-cdi-hook")
        );
        assert_eq!(value(&ds, "DEVICE_ID_STRATEGY").as_deref(), Some("index"));
    }
}
