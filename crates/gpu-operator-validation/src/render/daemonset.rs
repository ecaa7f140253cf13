//! `nvidia-operator-validator`: one init container per check (driver → toolkit → cuda → plugin),
//! each running `gpu-operator-validator` with its component, then a main container that idles and
//! removes the status files on shutdown (preStop), so a restart re-gates every operand.

use gpu_operator_api::{
    labels::operand,
    spec::{EnvVar as SpecEnvVar, MigStrategy, ValidatorComponentSpec},
    validator::{component, env as names},
};
use gpu_operator_core::{
    daemonset::{self, Identity},
    operand::Operand as _,
};
use k8s_openapi::api::{
    apps::v1::DaemonSet,
    core::v1::{
        Container, EnvVar, EnvVarSource, ExecAction, HostPathVolumeSource, Lifecycle,
        LifecycleHandler, ObjectFieldSelector, PodSpec, SecurityContext, Volume, VolumeMount,
    },
};

use crate::{DAEMONSET, Input, Validation};

/// The validator binary in the operator image.
const BINARY: &str = "gpu-operator-validator";
/// Where the status files live on the host and in the containers.
const VALIDATIONS: &str = "/run/nvidia/validations";

/// The DaemonSet.
pub fn build(input: &Input) -> DaemonSet {
    let spec = &input.spec;
    let section = spec.validator.clone().unwrap_or_default();
    let plugin_enabled = spec.device_plugin.enabled != Some(false);
    let mig_strategy = spec
        .mig
        .as_ref()
        .and_then(|m| m.strategy)
        .unwrap_or(MigStrategy::Single);
    let driver_managed = spec.driver.enabled != Some(false);
    let mut checks = vec![
        check(
            input,
            component::DRIVER,
            section.driver.as_ref(),
            &[
                (names::WITH_WAIT, "true".to_owned()),
                (
                    names::DRIVER_MANAGED_BY_OPERATOR,
                    driver_managed.to_string(),
                ),
            ],
        ),
        check(
            input,
            component::TOOLKIT,
            section.toolkit.as_ref(),
            &[(names::WITH_WAIT, "false".to_owned())],
        ),
        check(
            input,
            component::CUDA,
            section.cuda.as_ref(),
            &[(names::WITH_WAIT, "false".to_owned())],
        ),
    ];
    if plugin_enabled {
        checks.push(check(
            input,
            component::PLUGIN,
            section.plugin.as_ref(),
            &[
                (names::WITH_WAIT, "false".to_owned()),
                (names::WITH_WORKLOAD, "false".to_owned()),
                (names::MIG_STRATEGY, mig_strategy.as_str().to_owned()),
            ],
        ));
    }
    let main = Container {
        name: DAEMONSET.to_owned(),
        image: Some(input.image.clone()),
        command: Some(vec![BINARY.to_owned()]),
        args: Some(vec!["idle".to_owned()]),
        env: Some(daemonset::merge_env(&[], section.container.env())),
        security_context: Some(root()),
        volume_mounts: Some(vec![validations_mount()]),
        lifecycle: Some(Lifecycle {
            pre_stop: Some(LifecycleHandler {
                exec: Some(ExecAction {
                    command: Some(vec![BINARY.to_owned(), "cleanup".to_owned()]),
                }),
                ..LifecycleHandler::default()
            }),
            ..Lifecycle::default()
        }),
        ..Container::default()
    };
    let mut pod = PodSpec {
        service_account_name: Some(DAEMONSET.to_owned()),
        init_containers: Some(checks),
        containers: vec![main],
        volumes: Some(vec![
            host_path(
                "run-nvidia-validations",
                VALIDATIONS,
                Some("DirectoryOrCreate"),
            ),
            host_path("driver-install-dir", "/run/nvidia/driver", None),
            host_path("host-root", "/", None),
        ]),
        ..PodSpec::default()
    };
    daemonset::apply_component(
        &mut pod,
        &section.image,
        &section.container,
        section.host_network,
    );
    let id = Identity {
        name: DAEMONSET,
        component: Validation::NAME,
        deploy_label: operand::OPERATOR_VALIDATOR,
        always_on_delete: false,
    };
    daemonset::build(id, pod, &spec.daemonsets)
}

/// One `<component>-validation` init container.
fn check(
    input: &Input,
    name: &str,
    settings: Option<&ValidatorComponentSpec>,
    extra: &[(&'static str, String)],
) -> Container {
    let mut defaults = vec![
        (names::COMPONENT, name.to_owned()),
        (names::OUTPUT_DIR, VALIDATIONS.to_owned()),
    ];
    defaults.extend(extra.iter().cloned());
    let user: &[SpecEnvVar] = settings.and_then(|s| s.env.as_deref()).unwrap_or_default();
    let mut env = daemonset::merge_env(&defaults, user);
    env.push(field_env(names::NODE_NAME, "spec.nodeName"));
    env.push(field_env(names::OPERATOR_NAMESPACE, "metadata.namespace"));
    env.push(EnvVar {
        name: names::VALIDATOR_IMAGE.to_owned(),
        value: Some(input.image.clone()),
        value_from: None,
    });
    let lift = input
        .spec
        .validator
        .as_ref()
        .and_then(|v| v.lift_startup_taint)
        .unwrap_or(false);
    if lift {
        env.push(EnvVar {
            name: names::LIFT_STARTUP_TAINT.to_owned(),
            value: Some("true".to_owned()),
            value_from: None,
        });
    }
    Container {
        name: format!("{name}-validation"),
        image: Some(input.image.clone()),
        command: Some(vec![BINARY.to_owned()]),
        env: Some(env),
        security_context: Some(root()),
        volume_mounts: Some(vec![
            validations_mount(),
            VolumeMount {
                name: "driver-install-dir".to_owned(),
                mount_path: "/run/nvidia/driver".to_owned(),
                ..VolumeMount::default()
            },
            VolumeMount {
                name: "host-root".to_owned(),
                mount_path: "/host".to_owned(),
                read_only: Some(true),
                ..VolumeMount::default()
            },
        ]),
        ..Container::default()
    }
}

fn field_env(name: &str, path: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value: None,
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: path.to_owned(),
                api_version: None,
            }),
            ..EnvVarSource::default()
        }),
    }
}

/// Validation runs as root and privileged, as NVIDIA's does (it loads and inspects the driver).
fn root() -> SecurityContext {
    SecurityContext {
        privileged: Some(true),
        run_as_user: Some(0),
        ..SecurityContext::default()
    }
}

fn validations_mount() -> VolumeMount {
    VolumeMount {
        name: "run-nvidia-validations".to_owned(),
        mount_path: VALIDATIONS.to_owned(),
        mount_propagation: Some("Bidirectional".to_owned()),
        ..VolumeMount::default()
    }
}

fn host_path(name: &str, path: &str, type_: Option<&str>) -> Volume {
    Volume {
        name: name.to_owned(),
        host_path: Some(HostPathVolumeSource {
            path: path.to_owned(),
            type_: type_.map(str::to_owned),
        }),
        ..Volume::default()
    }
}

#[cfg(test)]
mod tests {
    use gpu_operator_api::{
        ClusterPolicySpec,
        spec::{MigSpec, ValidatorSpec},
    };

    use super::*;

    fn render(spec: ClusterPolicySpec) -> PodSpec {
        let ds = build(&Input {
            image: "ghcr.io/x/gpu-operator:1".into(),
            spec,
            namespace: "gpu-operator".into(),
        });
        assert_eq!(ds.metadata.name.as_deref(), Some(DAEMONSET));
        ds.spec.unwrap().template.spec.unwrap()
    }

    fn init_names(pod: &PodSpec) -> Vec<String> {
        pod.init_containers
            .clone()
            .unwrap()
            .into_iter()
            .map(|c| c.name)
            .collect()
    }

    fn env(container: &Container, name: &str) -> Option<String> {
        container
            .env
            .clone()
            .unwrap()
            .into_iter()
            .find(|e| e.name == name)
            .and_then(|e| e.value)
    }

    #[test]
    fn checks_run_in_nvidias_order_and_plugin_only_with_the_plugin() {
        let pod = render(ClusterPolicySpec::default());
        assert_eq!(
            init_names(&pod),
            [
                "driver-validation",
                "toolkit-validation",
                "cuda-validation",
                "plugin-validation"
            ]
        );
        assert_eq!(
            pod.node_selector.unwrap()["nvidia.com/gpu.deploy.operator-validator"],
            "true"
        );
        let mut spec = ClusterPolicySpec::default();
        spec.device_plugin.enabled = Some(false);
        assert_eq!(
            init_names(&render(spec)),
            ["driver-validation", "toolkit-validation", "cuda-validation"]
        );
    }

    #[test]
    fn the_plugin_check_gets_the_mig_strategy_and_component_env_wins() {
        let mut spec = ClusterPolicySpec {
            mig: Some(MigSpec {
                strategy: Some(MigStrategy::Mixed),
            }),
            ..ClusterPolicySpec::default()
        };
        spec.validator = Some(ValidatorSpec {
            plugin: Some(ValidatorComponentSpec {
                env: Some(vec![SpecEnvVar::new("WITH_WORKLOAD", "true")]),
            }),
            ..ValidatorSpec::default()
        });
        let pod = render(spec);
        let plugin = &pod.init_containers.unwrap()[3];
        assert_eq!(env(plugin, "MIG_STRATEGY").as_deref(), Some("mixed"));
        assert_eq!(env(plugin, "WITH_WORKLOAD").as_deref(), Some("true"));
        assert_eq!(env(plugin, "COMPONENT").as_deref(), Some("plugin"));
    }

    #[test]
    fn the_startup_taint_is_lifted_only_when_asked() {
        let pod = render(ClusterPolicySpec::default());
        assert!(
            pod.init_containers
                .unwrap()
                .iter()
                .all(|c| env(c, "LIFT_STARTUP_TAINT").is_none())
        );
        let spec = ClusterPolicySpec {
            validator: Some(ValidatorSpec {
                lift_startup_taint: Some(true),
                ..ValidatorSpec::default()
            }),
            ..ClusterPolicySpec::default()
        };
        let pod = render(spec);
        assert!(
            pod.init_containers
                .unwrap()
                .iter()
                .all(|c| env(c, "LIFT_STARTUP_TAINT").as_deref() == Some("true"))
        );
    }

    #[test]
    fn the_driver_check_waits_and_the_main_container_cleans_up_on_stop() {
        let pod = render(ClusterPolicySpec::default());
        assert_eq!(
            env(&pod.init_containers.clone().unwrap()[0], "WITH_WAIT").as_deref(),
            Some("true")
        );
        let pre_stop = pod.containers[0]
            .lifecycle
            .clone()
            .unwrap()
            .pre_stop
            .unwrap()
            .exec
            .unwrap()
            .command
            .unwrap();
        assert_eq!(pre_stop, ["gpu-operator-validator", "cleanup"]);
    }

    #[test]
    fn the_driver_check_waits_for_the_driver_container_only_when_the_operator_deploys_it() {
        let pod = render(ClusterPolicySpec::default());
        let driver = &pod.init_containers.clone().unwrap()[0];
        assert_eq!(
            env(driver, "DRIVER_MANAGED_BY_OPERATOR").as_deref(),
            Some("true")
        );
        let mut spec = ClusterPolicySpec::default();
        spec.driver.enabled = Some(false);
        let pod = render(spec);
        let driver = &pod.init_containers.clone().unwrap()[0];
        assert_eq!(
            env(driver, "DRIVER_MANAGED_BY_OPERATOR").as_deref(),
            Some("false")
        );
    }
}
