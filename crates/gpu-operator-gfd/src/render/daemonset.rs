//! `gpu-feature-discovery`: the `toolkit-validation` barrier, the GFD container with NVIDIA's env
//! (sleep interval, MIG strategy, its pod's identity), NFD's feature directory and `/sys`, and
//! the config manager when `devicePlugin.config` is set. Labelled and selected, as NVIDIA's, by
//! `app=gpu-feature-discovery` and `app.kubernetes.io/part-of=nvidia-gpu`.

use gpu_operator_api::labels::operand;
use gpu_operator_core::{
    build::{
        barrier,
        daemonset::{self, Identity, field_env},
        pod::{self, Finish, Gpus, Wrap, host_path, mount, read_only_mount},
    },
    contract::Operand as _,
};
use gpu_operator_plugin_config::config_manager;
use k8s_openapi::api::{
    apps::v1::DaemonSet,
    core::v1::{Container, PodSpec},
};

use crate::{CONFIGS, DAEMONSET, GpuFeatureDiscovery, Input, SERVICE_ACCOUNT};

/// The GFD container, also the process the config manager signals.
const CONTAINER: &str = "gpu-feature-discovery";
/// NVIDIA's `app.kubernetes.io/part-of` of GFD, part of its (immutable) selector.
const PART_OF: &str = "nvidia-gpu";
/// NFD's directory of local feature files, where GFD writes its labels.
const FEATURES_DIR: &str = "/etc/kubernetes/node-feature-discovery/features.d";

/// The DaemonSet.
pub fn build(input: &Input) -> DaemonSet {
    let mut defaults = vec![
        ("GFD_SLEEP_INTERVAL", "60s".to_owned()),
        ("GFD_FAIL_ON_INIT_ERROR", "true".to_owned()),
    ];
    defaults.extend(input.mig_env.iter().cloned());
    let mut env = vec![
        field_env("NAMESPACE", "metadata.namespace"),
        field_env("NODE_NAME", "spec.nodeName"),
        field_env("POD_NAME", "metadata.name"),
    ];
    env.extend(daemonset::merge_env(&defaults, &input.component.env));
    let main = Container {
        name: CONTAINER.to_owned(),
        image: Some(input.image.clone()),
        command: Some(vec!["gpu-feature-discovery".to_owned()]),
        env: Some(env),
        security_context: Some(pod::privileged()),
        volume_mounts: Some(vec![
            mount("output-dir", FEATURES_DIR),
            read_only_mount("host-sys", "/sys"),
        ]),
        ..Container::default()
    };
    let mut pod = PodSpec {
        service_account_name: Some(SERVICE_ACCOUNT.to_owned()),
        init_containers: Some(vec![barrier::wait_for("toolkit", &input.validator_image)]),
        containers: vec![main],
        volumes: Some(vec![
            host_path("output-dir", FEATURES_DIR, None),
            host_path("host-sys", "/sys", None),
            barrier::volume(),
        ]),
        ..PodSpec::default()
    };
    if let Some(image) = &input.config_manager_image {
        let wiring = config_manager::Wiring {
            main_container: CONTAINER,
            process_to_signal: CONTAINER,
            image,
        };
        let configs = config_manager::Configs {
            config_map: CONFIGS,
            default: &input.config_default,
        };
        config_manager::apply(&mut pod, wiring, Some(configs));
    }
    let steps = Finish {
        component: &input.component,
        barrier: input.shared.in_pod(),
        host_paths: input.shared.rewrite_host_paths(),
        args: Some(CONTAINER),
    };
    let mut ds = pod::finish(pod, steps).into_daemonset(Wrap {
        identity: Identity {
            name: DAEMONSET,
            component: GpuFeatureDiscovery::NAME,
            deploy_label: operand::GPU_FEATURE_DISCOVERY,
            always_on_delete: false,
        },
        daemonsets: &input.shared.daemonsets,
        gpus: Some(Gpus {
            access: &input.gpu_access,
            container: CONTAINER,
        }),
    });
    part_of_nvidia_gpu(&mut ds);
    ds
}

/// NVIDIA's GFD carries `app.kubernetes.io/part-of=nvidia-gpu` and selects on it; so do we, so a
/// DaemonSet NVIDIA's operator left behind can be taken over (selectors are immutable).
fn part_of_nvidia_gpu(ds: &mut DaemonSet) {
    let key = "app.kubernetes.io/part-of".to_owned();
    let value = PART_OF.to_owned();
    if let Some(labels) = ds.metadata.labels.as_mut() {
        labels.insert(key.clone(), value.clone());
    }
    if let Some(spec) = ds.spec.as_mut() {
        spec.selector
            .match_labels
            .get_or_insert_with(Default::default)
            .insert(key.clone(), value.clone());
        if let Some(labels) = spec
            .template
            .metadata
            .as_mut()
            .and_then(|m| m.labels.as_mut())
        {
            labels.insert(key, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use gpu_operator_api::{
        ClusterPolicySpec,
        spec::{DevicePluginConfig, EnvVar, MigSpec, MigStrategy},
    };

    use super::*;

    #[allow(clippy::needless_pass_by_value)] // callers build the spec inline
    fn render(spec: ClusterPolicySpec) -> DaemonSet {
        build(&crate::validate::for_tests(&spec))
    }

    fn pod(ds: &DaemonSet) -> &PodSpec {
        ds.spec.as_ref().unwrap().template.spec.as_ref().unwrap()
    }

    fn value(ds: &DaemonSet, name: &str) -> Option<String> {
        pod(ds).containers[0]
            .env
            .iter()
            .flatten()
            .find(|e| e.name == name)
            .and_then(|e| e.value.clone())
    }

    #[test]
    fn names_labels_selector_and_barrier_follow_nvidia() {
        let ds = render(ClusterPolicySpec::default());
        assert_eq!(ds.metadata.name.as_deref(), Some("gpu-feature-discovery"));
        let selector = ds
            .spec
            .as_ref()
            .unwrap()
            .selector
            .match_labels
            .clone()
            .unwrap();
        assert_eq!(selector["app"], "gpu-feature-discovery");
        assert_eq!(selector["app.kubernetes.io/part-of"], "nvidia-gpu");
        let template = ds.spec.as_ref().unwrap().template.metadata.clone().unwrap();
        assert_eq!(
            template.labels.unwrap()["app.kubernetes.io/part-of"],
            "nvidia-gpu"
        );
        let pod = pod(&ds);
        assert_eq!(
            pod.node_selector.as_ref().unwrap()["nvidia.com/gpu.deploy.gpu-feature-discovery"],
            "true"
        );
        assert_eq!(
            pod.service_account_name.as_deref(),
            Some("nvidia-gpu-feature-discovery")
        );
        assert_eq!(
            pod.init_containers.as_ref().unwrap()[0].name,
            "toolkit-validation"
        );
        assert_eq!(value(&ds, "GFD_SLEEP_INTERVAL").as_deref(), Some("60s"));
    }

    #[test]
    fn mig_strategy_env_follows_nvidia_and_user_env_wins() {
        let mut spec = ClusterPolicySpec {
            mig: Some(MigSpec {
                strategy: Some(MigStrategy::Single),
            }),
            ..ClusterPolicySpec::default()
        };
        spec.gfd.container.env = Some(vec![EnvVar::new("GFD_SLEEP_INTERVAL", "10s")]);
        let ds = render(spec);
        assert_eq!(value(&ds, "MIG_STRATEGY").as_deref(), Some("single"));
        assert_eq!(
            value(&ds, "NVIDIA_MIG_MONITOR_DEVICES").as_deref(),
            Some("all")
        );
        assert_eq!(value(&ds, "GFD_SLEEP_INTERVAL").as_deref(), Some("10s"));
    }

    #[test]
    fn a_device_plugin_config_adds_the_config_manager_signalling_gfd() {
        let mut spec = ClusterPolicySpec::default();
        spec.device_plugin.config = Some(DevicePluginConfig {
            name: Some("time-slicing-config".into()),
            default: Some("any".into()),
        });
        let ds = render(spec);
        let pod = pod(&ds);
        assert_eq!(pod.containers[1].name, "config-manager");
        assert_eq!(
            pod.containers[1].image.as_deref(),
            Some("registry.example.com/device-plugin:v1")
        );
        assert_eq!(pod.share_process_namespace, Some(true));
        let signal = pod.containers[1]
            .env
            .iter()
            .flatten()
            .find(|e| e.name == "PROCESS_TO_SIGNAL")
            .unwrap();
        assert_eq!(signal.value.as_deref(), Some("gpu-feature-discovery"));
        assert_eq!(
            value(&ds, "CONFIG_FILE").as_deref(),
            Some("/config/config.yaml")
        );
    }
}
