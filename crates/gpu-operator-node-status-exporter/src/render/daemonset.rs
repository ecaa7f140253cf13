//! DaemonSet `nvidia-node-status-exporter`: the validator image's metrics component
//! (`COMPONENT=metrics`) on port 8000, as root, reading the status files under `/run/nvidia` and
//! the host root; `DEVICE_PLUGIN_ENABLED` follows `devicePlugin.enabled`.

use gpu_operator_api::{
    labels::operand,
    validator::{component, env},
};
use gpu_operator_core::{
    build::{
        daemonset::{self, Identity},
        pod::{self, Barrier, Finish, Wrap, host_path},
    },
    contract::Operand as _,
};
use k8s_openapi::api::{
    apps::v1::DaemonSet,
    core::v1::{Container, ContainerPort, EnvVar, PodSpec, SecurityContext, VolumeMount},
};

use crate::{Input, NAME, NodeStatusExporter, PORT};

/// The DaemonSet.
pub fn build(input: &Input) -> DaemonSet {
    let literal = |name: &str, value: &str| EnvVar {
        name: name.to_owned(),
        value: Some(value.to_owned()),
        value_from: None,
    };
    let env = vec![
        literal("NVIDIA_VISIBLE_DEVICES", "void"),
        literal(env::COMPONENT, component::METRICS),
        literal(env::METRICS_PORT, &PORT.1.to_string()),
        // NVIDIA's fix for a disabled device plugin: the device count becomes -1, not 0, so the
        // "no GPU devices" alert does not fire.
        literal(
            env::DEVICE_PLUGIN_ENABLED,
            if input.device_plugin_enabled {
                "true"
            } else {
                "false"
            },
        ),
        daemonset::field_env("NODE_NAME", "spec.nodeName"),
        daemonset::field_env("OPERATOR_NAMESPACE", "metadata.namespace"),
    ];
    let mount = |name: &str, path: &str, read_only: Option<bool>| VolumeMount {
        name: name.to_owned(),
        mount_path: path.to_owned(),
        read_only,
        mount_propagation: Some("HostToContainer".to_owned()),
        ..VolumeMount::default()
    };
    let pod = PodSpec {
        service_account_name: Some(NAME.to_owned()),
        containers: vec![Container {
            name: NAME.to_owned(),
            image: Some(input.image.clone()),
            command: Some(vec!["nvidia-validator".to_owned()]),
            env: Some(daemonset::override_env(env, &input.component.env)),
            ports: Some(vec![ContainerPort {
                name: Some(PORT.0.to_owned()),
                container_port: PORT.1,
                ..ContainerPort::default()
            }]),
            security_context: Some(SecurityContext {
                run_as_user: Some(0),
                ..pod::privileged()
            }),
            volume_mounts: Some(vec![
                mount("run-nvidia", "/run/nvidia", None),
                mount("host-root", "/host", Some(true)),
            ]),
            ..Container::default()
        }],
        volumes: Some(vec![
            host_path("run-nvidia", "/run/nvidia", Some("Directory")),
            host_path("host-root", "/", None),
        ]),
        ..PodSpec::default()
    };
    let steps = Finish {
        component: &input.component,
        // It reads the status files whenever they are there; it waits on nothing.
        barrier: Barrier::None,
        host_paths: input.shared.rewrite_host_paths(),
        args: Some(NAME),
    };
    pod::finish(pod, steps).into_daemonset(Wrap {
        identity: Identity {
            name: NAME,
            component: NodeStatusExporter::NAME,
            deploy_label: operand::NODE_STATUS_EXPORTER,
            always_on_delete: false,
        },
        daemonsets: &input.shared.daemonsets,
        gpus: None,
    })
}

#[cfg(test)]
mod tests {
    use gpu_operator_api::ClusterPolicySpec;

    use super::*;

    fn env_value<'a>(container: &'a Container, name: &str) -> Option<&'a str> {
        container
            .env
            .as_ref()?
            .iter()
            .find(|e| e.name == name)?
            .value
            .as_deref()
    }

    #[test]
    fn a_disabled_device_plugin_is_passed_on() {
        let mut spec = ClusterPolicySpec::default();
        spec.device_plugin.enabled = Some(false);
        let ds = build(&Input::new(
            &spec,
            "nvcr.io/nvidia/gpu-operator:v26".into(),
            "gpu-operator".into(),
            false,
        ));
        let pod = ds.spec.unwrap().template.spec.unwrap();
        assert_eq!(
            env_value(&pod.containers[0], "DEVICE_PLUGIN_ENABLED"),
            Some("false")
        );
    }

    #[test]
    fn the_validators_metrics_component_runs_as_root_on_8000() {
        let ds = build(&Input::new(
            &ClusterPolicySpec::default(),
            "nvcr.io/nvidia/gpu-operator:v26".into(),
            "gpu-operator".into(),
            false,
        ));
        let pod = ds.spec.unwrap().template.spec.unwrap();
        let main = &pod.containers[0];
        let component = main
            .env
            .as_ref()
            .unwrap()
            .iter()
            .find(|e| e.name == "COMPONENT");
        assert_eq!(component.unwrap().value.as_deref(), Some("metrics"));
        assert_eq!(env_value(main, "DEVICE_PLUGIN_ENABLED"), Some("true"));
        assert_eq!(main.ports.as_ref().unwrap()[0].container_port, 8000);
        assert_eq!(main.security_context.as_ref().unwrap().run_as_user, Some(0));
        assert_eq!(
            pod.node_selector.unwrap()["nvidia.com/gpu.deploy.node-status-exporter"],
            "true"
        );
    }
}
