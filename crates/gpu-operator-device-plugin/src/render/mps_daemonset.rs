//! `nvidia-device-plugin-mps-control-daemon`: on device-plugin nodes that GPU Feature Discovery
//! labelled `nvidia.com/mps.capable=true` (their configuration shares GPUs with MPS), the MPS
//! control daemon with the host's PID namespace, its `mps.root` and shared-memory host paths,
//! the `toolkit-validation` barrier and the config manager when `devicePlugin.config` is set.

use gpu_operator_api::labels::MPS_CAPABLE;
use gpu_operator_core::build::{
    barrier, daemonset,
    pod::{mount, privileged},
};
use k8s_openapi::api::{
    apps::v1::DaemonSet,
    core::v1::{Container, PodSpec, VolumeMount},
};

use super::{Plugin, finish, mps_volumes};
use crate::{Input, MPS_DAEMONSET, SERVICE_ACCOUNT};

/// The daemon container.
const CONTAINER: &str = "mps-control-daemon-ctr";

/// The DaemonSet.
pub fn build(input: &Input) -> DaemonSet {
    let mut defaults = vec![
        ("NVIDIA_VISIBLE_DEVICES", "all".to_owned()),
        ("NVIDIA_DRIVER_CAPABILITIES", "compute,utility".to_owned()),
    ];
    defaults.extend(input.mig_env.iter().cloned());
    let mut env = daemonset::merge_env(&defaults, &[]);
    env.insert(0, daemonset::field_env("NODE_NAME", "spec.nodeName"));
    let mounts = Container {
        name: "mps-control-daemon-mounts".to_owned(),
        image: Some(input.image.clone()),
        command: Some(vec![
            "mps-control-daemon".to_owned(),
            "mount-shm".to_owned(),
        ]),
        security_context: Some(privileged()),
        volume_mounts: Some(vec![VolumeMount {
            mount_propagation: Some("Bidirectional".to_owned()),
            ..mount("mps-root", "/mps")
        }]),
        ..Container::default()
    };
    let main = Container {
        name: CONTAINER.to_owned(),
        image: Some(input.image.clone()),
        command: Some(vec!["mps-control-daemon".to_owned()]),
        env: Some(env),
        security_context: Some(privileged()),
        volume_mounts: Some(vec![
            mount("mps-shm", "/dev/shm"),
            mount("mps-root", "/mps"),
        ]),
        ..Container::default()
    };
    let mut volumes = vec![barrier::volume()];
    volumes.extend(mps_volumes(&input.mps_root));
    let pod = PodSpec {
        // NVIDIA's daemon runs under the device plugin's ServiceAccount.
        service_account_name: Some(SERVICE_ACCOUNT.to_owned()),
        host_pid: Some(true),
        node_selector: Some([(MPS_CAPABLE.to_owned(), "true".to_owned())].into()),
        init_containers: Some(vec![
            barrier::wait_for("toolkit", &input.validator_image),
            mounts,
        ]),
        containers: vec![main],
        volumes: Some(volumes),
        ..PodSpec::default()
    };
    let plugin = Plugin {
        name: MPS_DAEMONSET,
        main: CONTAINER,
        process: "/usr/bin/mps-control-daemon",
        args_to_main: false,
    };
    finish(pod, input, &plugin)
}

#[cfg(test)]
mod tests {
    use gpu_operator_api::{
        ClusterPolicySpec,
        spec::{DevicePluginConfig, MpsConfig},
    };

    use super::*;

    #[allow(clippy::needless_pass_by_value)] // callers build the spec inline
    fn render(spec: ClusterPolicySpec) -> PodSpec {
        let ds = build(&crate::validate::for_tests(&spec));
        assert_eq!(
            ds.metadata.name.as_deref(),
            Some("nvidia-device-plugin-mps-control-daemon")
        );
        ds.spec.unwrap().template.spec.unwrap()
    }

    #[test]
    fn the_daemon_runs_only_on_mps_capable_device_plugin_nodes_with_host_pid() {
        let pod = render(ClusterPolicySpec::default());
        let selector = pod.node_selector.unwrap();
        assert_eq!(selector["nvidia.com/mps.capable"], "true");
        assert_eq!(selector["nvidia.com/gpu.deploy.device-plugin"], "true");
        assert_eq!(pod.host_pid, Some(true));
        assert_eq!(
            pod.service_account_name.as_deref(),
            Some("nvidia-device-plugin")
        );
        let inits: Vec<_> = pod
            .init_containers
            .unwrap()
            .into_iter()
            .map(|c| c.name)
            .collect();
        assert_eq!(inits, ["toolkit-validation", "mps-control-daemon-mounts"]);
    }

    #[test]
    fn mps_root_moves_both_host_paths() {
        let mut spec = ClusterPolicySpec::default();
        spec.device_plugin.mps = Some(MpsConfig {
            root: Some("/var/mps".into()),
        });
        let volumes = render(spec).volumes.unwrap();
        let path = |name: &str| {
            volumes
                .iter()
                .find(|v| v.name == name)
                .unwrap()
                .host_path
                .clone()
                .unwrap()
                .path
        };
        assert_eq!(path("mps-root"), "/var/mps");
        assert_eq!(path("mps-shm"), "/var/mps/shm");
    }

    #[test]
    fn the_config_manager_signals_the_daemon_and_host_pid_replaces_process_sharing() {
        let mut spec = ClusterPolicySpec::default();
        spec.device_plugin.config = Some(DevicePluginConfig {
            name: Some("mps-config".into()),
            default: Some("any".into()),
        });
        let pod = render(spec);
        assert_eq!(pod.share_process_namespace, None);
        let sidecar = pod
            .containers
            .iter()
            .find(|c| c.name == "config-manager")
            .unwrap();
        let signal = sidecar
            .env
            .iter()
            .flatten()
            .find(|e| e.name == "PROCESS_TO_SIGNAL")
            .unwrap();
        assert_eq!(signal.value.as_deref(), Some("/usr/bin/mps-control-daemon"));
        let inits: Vec<_> = pod
            .init_containers
            .unwrap()
            .into_iter()
            .map(|c| c.name)
            .collect();
        assert_eq!(
            inits,
            [
                "toolkit-validation",
                "mps-control-daemon-mounts",
                "config-manager-init"
            ]
        );
    }
}
