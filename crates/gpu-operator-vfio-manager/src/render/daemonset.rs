//! DaemonSet `nvidia-vfio-manager`, as NVIDIA builds it: the `k8s-driver-manager` init container
//! unloads the NVIDIA driver (no GPU pod eviction, no drain: a `vm-passthrough` node runs no GPU
//! containers), then the privileged `nvidia-vfio-manager` container binds every NVIDIA GPU to
//! `vfio-pci` and sleeps, unbinding them when it stops. No validation barrier: it runs where no
//! driver is wanted.

use gpu_operator_api::labels::operand;
use gpu_operator_core::{
    build::{
        daemonset::{Identity, field_env, override_env},
        pod::{self, Barrier, Finish, Wrap, host_path, mount, propagated, read_only_mount},
    },
    contract::Operand as _,
};
use k8s_openapi::{
    api::{
        apps::v1::DaemonSet,
        core::v1::{
            Container, EnvVar, ExecAction, Lifecycle, LifecycleHandler, PodSpec,
            ResourceRequirements, SELinuxOptions, SecurityContext,
        },
    },
    apimachinery::pkg::api::resource::Quantity,
};

use crate::{Input, NAME, VfioManager};

/// Name of the driver manager init container.
pub const MANAGER_CONTAINER: &str = "k8s-driver-manager";
/// What the main container runs (through `/bin/sh -c`) unless `vfioManager.args` replace it.
const BIND_AND_WAIT: &str = "vfio-manage bind --all && while true; do sleep 86400; done";
/// What the main container runs before it stops.
const UNBIND: &str = "vfio-manage unbind --all";

/// The DaemonSet.
pub fn build(input: &Input) -> DaemonSet {
    let pod = PodSpec {
        service_account_name: Some(NAME.to_owned()),
        init_containers: Some(vec![manager(input)]),
        containers: vec![vfio_manager(input)],
        termination_grace_period_seconds: Some(30),
        volumes: Some(vec![
            host_path("host-sys", "/sys", Some("Directory")),
            host_path("host-lib-modules", "/lib/modules", Some("Directory")),
            host_path("run-nvidia", "/run/nvidia", Some("DirectoryOrCreate")),
            host_path("host-root", "/", None),
        ]),
        ..PodSpec::default()
    };
    let steps = Finish {
        component: &input.component,
        barrier: Barrier::None,
        host_paths: input.shared.rewrite_host_paths(),
        args: Some(NAME),
    };
    let mut finished = pod::finish(pod, steps);
    input
        .manager_pull
        .apply_to_init(finished.pod_mut(), MANAGER_CONTAINER);
    finished.into_daemonset(Wrap {
        identity: Identity {
            name: NAME,
            component: VfioManager::NAME,
            deploy_label: operand::VFIO_MANAGER,
            always_on_delete: false,
        },
        daemonsets: &input.shared.daemonsets,
        gpus: None,
    })
}

/// `k8s-driver-manager uninstall_driver`, with `vfioManager.driverManager.env` over NVIDIA's
/// variables.
fn manager(input: &Input) -> Container {
    let literal = |name: &str, value: &str| EnvVar {
        name: name.to_owned(),
        value: Some(value.to_owned()),
        value_from: None,
    };
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

/// The `nvidia-vfio-manager` container, with NVIDIA's default resources (which
/// `vfioManager.resources` replace) and `vfioManager.env` over its `HOST_ROOT`.
fn vfio_manager(input: &Input) -> Container {
    let quantity = |q: &str| Quantity(q.to_owned());
    let shell = |command: &str| vec!["/bin/sh".to_owned(), "-c".to_owned(), command.to_owned()];
    let host_root = EnvVar {
        name: "HOST_ROOT".to_owned(),
        value: Some("/host".to_owned()),
        value_from: None,
    };
    Container {
        name: NAME.to_owned(),
        image: Some(input.image.clone()),
        command: Some(vec!["/bin/sh".to_owned(), "-c".to_owned()]),
        args: Some(vec![BIND_AND_WAIT.to_owned()]),
        env: Some(override_env(vec![host_root], &input.component.env)),
        resources: Some(ResourceRequirements {
            limits: Some([("memory".to_owned(), quantity("200Mi"))].into()),
            requests: Some(
                [
                    ("cpu".to_owned(), quantity("100m")),
                    ("memory".to_owned(), quantity("200Mi")),
                ]
                .into(),
            ),
            ..ResourceRequirements::default()
        }),
        volume_mounts: Some(vec![
            mount("host-sys", "/sys"),
            read_only_mount("host-lib-modules", "/lib/modules"),
            mount("host-root", "/host"),
        ]),
        security_context: Some(SecurityContext {
            se_linux_options: Some(SELinuxOptions {
                level: Some("s0".to_owned()),
                ..SELinuxOptions::default()
            }),
            ..pod::privileged()
        }),
        lifecycle: Some(Lifecycle {
            pre_stop: Some(LifecycleHandler {
                exec: Some(ExecAction {
                    command: Some(shell(UNBIND)),
                }),
                ..LifecycleHandler::default()
            }),
            ..Lifecycle::default()
        }),
        ..Container::default()
    }
}

#[cfg(test)]
mod tests {
    use gpu_operator_api::{
        ClusterPolicySpec,
        spec::{SandboxWorkloadsSpec, VfioManagerSpec},
    };
    use gpu_operator_core::fixtures;
    use serde_json::json;

    use super::*;
    use crate::validate;

    /// The pod of the DaemonSet for section `vfioManager` (enabled, sandbox workloads on) and
    /// `hostPaths.rootFS` `root`.
    fn pod(section: serde_json::Value, root: Option<&str>) -> PodSpec {
        let mut section: VfioManagerSpec = serde_json::from_value(section).unwrap();
        section.enabled = Some(true);
        let mut spec = ClusterPolicySpec {
            sandbox_workloads: Some(SandboxWorkloadsSpec {
                enabled: Some(true),
                ..SandboxWorkloadsSpec::default()
            }),
            vfio_manager: Some(section),
            ..ClusterPolicySpec::default()
        };
        if let Some(root) = root {
            spec.host_paths = Some(serde_json::from_value(json!({"rootFS": root})).unwrap());
        }
        let input = fixtures::with_cluster(&fixtures::image_env, |cluster| {
            validate::validate(&spec, cluster)
        })
        .unwrap()
        .unwrap();
        let ds = build(&input);
        assert_eq!(ds.metadata.name.as_deref(), Some("nvidia-vfio-manager"));
        ds.spec.unwrap().template.spec.unwrap()
    }

    fn env<'a>(container: &'a Container, name: &str) -> Option<&'a str> {
        container
            .env
            .iter()
            .flatten()
            .find(|e| e.name == name)?
            .value
            .as_deref()
    }

    fn secrets(pod: &PodSpec) -> Vec<&str> {
        pod.image_pull_secrets
            .iter()
            .flatten()
            .map(|s| s.name.as_str())
            .collect()
    }

    #[test]
    fn nvidias_pod_by_default() {
        let pod = pod(json!({}), None);
        assert_eq!(
            pod.node_selector.as_ref().unwrap()["nvidia.com/gpu.deploy.vfio-manager"],
            "true"
        );
        assert_eq!(pod.service_account_name.as_deref(), Some(NAME));
        let init = &pod.init_containers.as_ref().unwrap()[0];
        assert_eq!(init.name, "k8s-driver-manager");
        assert_eq!(
            init.image.as_deref(),
            Some("registry.example.com/driver-manager:v1")
        );
        assert_eq!(
            init.args.as_deref(),
            Some(&["uninstall_driver".to_owned()][..])
        );
        assert_eq!(env(init, "ENABLE_GPU_POD_EVICTION"), Some("false"));
        assert_eq!(env(init, "ENABLE_AUTO_DRAIN"), Some("false"));
        assert_eq!(init.image_pull_policy.as_deref(), Some("IfNotPresent"));
        let main = &pod.containers[0];
        assert_eq!(main.name, NAME);
        assert_eq!(
            main.image.as_deref(),
            Some("registry.example.com/vfio-manager:v1")
        );
        assert_eq!(main.args.as_deref(), Some(&[BIND_AND_WAIT.to_owned()][..]));
        assert_eq!(env(main, "HOST_ROOT"), Some("/host"));
        let context = main.security_context.as_ref().unwrap();
        assert_eq!(context.privileged, Some(true));
        assert_eq!(
            context.se_linux_options.as_ref().unwrap().level.as_deref(),
            Some("s0")
        );
        assert!(main.lifecycle.as_ref().unwrap().pre_stop.is_some());
        let limits = main.resources.as_ref().unwrap().limits.as_ref().unwrap();
        assert_eq!(limits["memory"].0, "200Mi");
        assert_eq!(pod.host_network, None);
        assert!(secrets(&pod).is_empty());
    }

    #[test]
    fn every_setting_of_the_section_reaches_the_pod() {
        let pod = pod(
            json!({
                "imagePullPolicy": "Always", "imagePullSecrets": ["vfio-secret"],
                "resources": {"requests": {"cpu": "1"}},
                "args": ["vfio-manage bind --all"],
                "env": [{"name": "HOST_ROOT", "value": "/elsewhere"}, {"name": "B", "value": "2"}],
                "hostNetwork": true,
                "driverManager": {
                    "imagePullSecrets": ["manager-secret"],
                    "env": [{"name": "ENABLE_GPU_POD_EVICTION", "value": "true"}]
                }
            }),
            None,
        );
        let (init, main) = (
            &pod.init_containers.as_ref().unwrap()[0],
            &pod.containers[0],
        );
        assert_eq!(main.image_pull_policy.as_deref(), Some("Always"));
        // NVIDIA's template policy: the section's does not reach the driver manager.
        assert_eq!(init.image_pull_policy.as_deref(), Some("IfNotPresent"));
        assert_eq!(secrets(&pod), ["vfio-secret", "manager-secret"]);
        for container in [init, main] {
            let resources = container.resources.as_ref().unwrap();
            assert_eq!(resources.requests.as_ref().unwrap()["cpu"].0, "1");
            assert_eq!(resources.limits, None);
        }
        assert_eq!(
            main.args.as_deref(),
            Some(&["vfio-manage bind --all".to_owned()][..])
        );
        assert_eq!(env(main, "HOST_ROOT"), Some("/elsewhere"));
        assert_eq!(env(main, "B"), Some("2"));
        assert_eq!(env(init, "B"), None);
        assert_eq!(env(init, "ENABLE_GPU_POD_EVICTION"), Some("true"));
        assert_eq!(pod.host_network, Some(true));
        assert_eq!(pod.dns_policy.as_deref(), Some("ClusterFirstWithHostNet"));
    }

    #[test]
    fn the_driver_managers_pull_policy_applies_to_its_container_only() {
        let pod = pod(json!({"driverManager": {"imagePullPolicy": "Never"}}), None);
        let init = &pod.init_containers.as_ref().unwrap()[0];
        assert_eq!(init.image_pull_policy.as_deref(), Some("Never"));
        assert_eq!(
            pod.containers[0].image_pull_policy.as_deref(),
            Some("IfNotPresent")
        );
    }

    #[test]
    fn a_custom_root_fs_moves_the_host_root() {
        let pod = pod(json!({}), Some("/custom"));
        let root = pod
            .volumes
            .iter()
            .flatten()
            .find(|v| v.name == "host-root")
            .unwrap();
        assert_eq!(root.host_path.as_ref().unwrap().path, "/custom");
    }
}
