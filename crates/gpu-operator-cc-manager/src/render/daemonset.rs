//! DaemonSet `nvidia-cc-manager`, as NVIDIA builds it: one privileged container that sets the CC
//! mode of the node's GPUs (through sysfs) and marks its readiness with the status file
//! `/run/nvidia/validations/.cc-manager-ctr-ready`, which the sandbox validator's `cc-manager`
//! check reads and which the container removes before it stops. No validation barrier: it works
//! on GPUs no driver holds.

use gpu_operator_api::labels::operand;
use gpu_operator_core::{
    build::{
        daemonset::{Identity, field_env, override_env},
        pod::{self, Barrier, Finish, Wrap, host_path, mount},
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

use crate::{CcManager, Input, NAME};

/// NVIDIA's variable of the CC mode of nodes without a `nvidia.com/cc.mode` label.
pub const DEFAULT_CC_MODE: &str = "DEFAULT_CC_MODE";
/// The status file the container writes when the node's GPUs are in the mode asked for.
const READY_FILE: &str = "/run/nvidia/validations/.cc-manager-ctr-ready";

/// The DaemonSet.
pub fn build(input: &Input) -> DaemonSet {
    let pod = PodSpec {
        service_account_name: Some(NAME.to_owned()),
        containers: vec![cc_manager(input)],
        termination_grace_period_seconds: Some(30),
        volumes: Some(vec![
            host_path("host-sys", "/sys", Some("Directory")),
            host_path("run-nvidia", "/run/nvidia", Some("DirectoryOrCreate")),
        ]),
        ..PodSpec::default()
    };
    let steps = Finish {
        component: &input.component,
        barrier: Barrier::None,
        host_paths: input.shared.rewrite_host_paths(),
        args: Some(NAME),
    };
    pod::finish(pod, steps).into_daemonset(Wrap {
        identity: Identity {
            name: NAME,
            component: CcManager::NAME,
            deploy_label: operand::CC_MANAGER,
            always_on_delete: false,
        },
        daemonsets: &input.shared.daemonsets,
        gpus: None,
    })
}

/// The `nvidia-cc-manager` container, with NVIDIA's default resources (which
/// `ccManager.resources` replace) and `ccManager.env` over NVIDIA's variables.
fn cc_manager(input: &Input) -> Container {
    let quantity = |q: &str| Quantity(q.to_owned());
    let literal = |name: &str, value: &str| EnvVar {
        name: name.to_owned(),
        value: Some(value.to_owned()),
        value_from: None,
    };
    let mut env = vec![
        field_env("NODE_NAME", "spec.nodeName"),
        // The manager needs no GPU from the runtime: it works on the devices directly.
        literal("NVIDIA_VISIBLE_DEVICES", "void"),
    ];
    if let Some(mode) = input.default_mode {
        env.push(literal(DEFAULT_CC_MODE, mode));
    }
    Container {
        name: NAME.to_owned(),
        image: Some(input.image.clone()),
        env: Some(override_env(env, &input.component.env)),
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
            mount("run-nvidia", "/run/nvidia"),
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
                    command: Some(vec![
                        "/bin/rm".to_owned(),
                        "-f".to_owned(),
                        READY_FILE.to_owned(),
                    ]),
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
        spec::{CcManagerSpec, SandboxMode, SandboxWorkloadsSpec},
    };
    use gpu_operator_core::fixtures;
    use serde_json::json;

    use super::*;
    use crate::validate;

    /// The pod of the DaemonSet for section `ccManager` (enabled, sandbox workloads on in `kata`
    /// mode).
    fn pod(section: serde_json::Value) -> PodSpec {
        let mut section: CcManagerSpec = serde_json::from_value(section).unwrap();
        section.enabled = Some(true);
        let spec = ClusterPolicySpec {
            sandbox_workloads: Some(SandboxWorkloadsSpec {
                enabled: Some(true),
                mode: Some(SandboxMode::Kata),
                ..SandboxWorkloadsSpec::default()
            }),
            cc_manager: Some(section),
            ..ClusterPolicySpec::default()
        };
        let input = fixtures::with_cluster(&fixtures::image_env, |cluster| {
            validate::validate(&spec, cluster)
        })
        .unwrap()
        .unwrap();
        let ds = build(&input);
        assert_eq!(ds.metadata.name.as_deref(), Some("nvidia-cc-manager"));
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

    #[test]
    fn nvidias_pod_by_default() {
        let pod = pod(json!({}));
        assert_eq!(
            pod.node_selector.as_ref().unwrap()["nvidia.com/gpu.deploy.cc-manager"],
            "true"
        );
        assert_eq!(pod.service_account_name.as_deref(), Some(NAME));
        assert!(pod.init_containers.is_none());
        let main = &pod.containers[0];
        assert_eq!(main.name, NAME);
        assert_eq!(
            main.image.as_deref(),
            Some("registry.example.com/cc-manager:v1")
        );
        assert_eq!(main.args, None);
        assert_eq!(env(main, "NVIDIA_VISIBLE_DEVICES"), Some("void"));
        assert_eq!(env(main, DEFAULT_CC_MODE), None);
        assert!(main.env.as_ref().unwrap()[0].value_from.is_some());
        let context = main.security_context.as_ref().unwrap();
        assert_eq!(context.privileged, Some(true));
        let stop = main.lifecycle.as_ref().unwrap().pre_stop.as_ref().unwrap();
        assert_eq!(
            stop.exec.as_ref().unwrap().command.as_ref().unwrap()[2],
            READY_FILE
        );
        let limits = main.resources.as_ref().unwrap().limits.as_ref().unwrap();
        assert_eq!(limits["memory"].0, "200Mi");
        assert_eq!(pod.termination_grace_period_seconds, Some(30));
    }

    #[test]
    fn every_setting_of_the_section_reaches_the_pod() {
        let pod = pod(json!({
            "defaultMode": "on",
            "imagePullPolicy": "Always", "imagePullSecrets": ["cc-secret"],
            "resources": {"requests": {"cpu": "1"}},
            "args": ["--debug"],
            "env": [{"name": "DEFAULT_CC_MODE", "value": "off"}, {"name": "B", "value": "2"}],
            "hostNetwork": true
        }));
        let main = &pod.containers[0];
        assert_eq!(main.image_pull_policy.as_deref(), Some("Always"));
        assert_eq!(
            pod.image_pull_secrets.as_ref().unwrap()[0].name,
            "cc-secret"
        );
        let resources = main.resources.as_ref().unwrap();
        assert_eq!(resources.requests.as_ref().unwrap()["cpu"].0, "1");
        assert_eq!(resources.limits, None);
        assert_eq!(main.args.as_deref(), Some(&["--debug".to_owned()][..]));
        // NVIDIA sets defaultMode first, then the section's env over it.
        assert_eq!(env(main, DEFAULT_CC_MODE), Some("off"));
        assert_eq!(env(main, "B"), Some("2"));
        assert_eq!(pod.host_network, Some(true));
    }

    #[test]
    fn the_default_mode_is_passed_on() {
        let pod = pod(json!({"defaultMode": "on"}));
        assert_eq!(env(&pod.containers[0], DEFAULT_CC_MODE), Some("on"));
    }
}
