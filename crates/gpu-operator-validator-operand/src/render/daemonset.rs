//! `nvidia-operator-validator`: one init container per check (driver → toolkit → cuda → plugin),
//! each running `nvidia-validator` with its `COMPONENT` and NVIDIA's switches, then a main
//! container that idles and removes the status files on shutdown (preStop), so a restart re-gates
//! every operand. The main container and its hook are `sh -c` scripts of shell builtins, `sleep`
//! and `rm`: NVIDIA's validator image and ours both answer every command of this pod, except the
//! GPU health agent's container (`validator.health`), which runs the operator's own image.

use gpu_operator_api::{
    labels::operand,
    spec::EnvVar as SpecEnvVar,
    validator::{component, env as names},
};
use gpu_operator_core::{
    build::{
        daemonset::{self, Identity, field_env},
        host_paths,
        pod::{self, Barrier, Finish, Gpus, Wrap, host_path},
    },
    contract::Operand as _,
};
use k8s_openapi::api::{
    apps::v1::DaemonSet,
    core::v1::{
        Container, EnvVar, ExecAction, Lifecycle, LifecycleHandler, PodSpec, SecurityContext,
        VolumeMount,
    },
};

use crate::{DAEMONSET, Input, Validation, validate::HealthAgent};

/// The validator binary: NVIDIA's name, which both validator images carry in `/usr/bin`.
const BINARY: &str = "nvidia-validator";
/// The main container: say so, then sleep until the pod is stopped (a TERM ends it at once).
const IDLE_SCRIPT: &str = "echo all validations are successful; trap 'kill $! 2>/dev/null; exit 0' TERM INT; \
     while true; do sleep 3600 & wait $!; done";
/// The preStop hook: remove the status files, so a restarted validator gates the operands again.
const CLEANUP_SCRIPT: &str = "rm -f /run/nvidia/validations/*-ready";
/// Where the status files live on the host and in the containers.
const VALIDATIONS: &str = "/run/nvidia/validations";

/// The DaemonSet.
pub fn build(input: &Input) -> DaemonSet {
    let checks = checks(input);
    let main = Container {
        name: DAEMONSET.to_owned(),
        image: Some(input.image.clone()),
        command: Some(sh()),
        args: Some(vec![IDLE_SCRIPT.to_owned()]),
        env: Some(daemonset::merge_env(&[], &input.component.env)),
        security_context: Some(root()),
        volume_mounts: Some(vec![validations_mount()]),
        lifecycle: Some(Lifecycle {
            pre_stop: Some(LifecycleHandler {
                exec: Some(ExecAction {
                    command: Some([sh(), vec![CLEANUP_SCRIPT.to_owned()]].concat()),
                }),
                ..LifecycleHandler::default()
            }),
            ..Lifecycle::default()
        }),
        ..Container::default()
    };
    let mut containers = vec![main];
    if let Some(health) = &input.health {
        containers.push(health_agent(health));
    }
    let pod = PodSpec {
        service_account_name: Some(DAEMONSET.to_owned()),
        init_containers: Some(checks),
        containers,
        volumes: Some(vec![
            host_path(
                "run-nvidia-validations",
                VALIDATIONS,
                Some("DirectoryOrCreate"),
            ),
            host_path("driver-install-dir", "/run/nvidia/driver", None),
            host_path("host-root", "/", None),
            host_path(host_paths::HOST_DEV_CHAR_VOLUME, "/dev/char", None),
        ]),
        ..PodSpec::default()
    };
    let steps = Finish {
        component: &input.component,
        // This is the validator: its checks are the barrier the other operands wait on, and they
        // already run with the `validator` section's settings as its component.
        barrier: Barrier::None,
        host_paths: input.shared.rewrite_host_paths(),
        args: Some(DAEMONSET),
    };
    pod::finish(pod, steps).into_daemonset(Wrap {
        identity: Identity {
            name: DAEMONSET,
            component: Validation::NAME,
            deploy_label: operand::OPERATOR_VALIDATOR,
            always_on_delete: false,
        },
        daemonsets: &input.shared.daemonsets,
        // The toolkit check runs `nvidia-smi` with the GPUs the runtime injects.
        gpus: Some(Gpus {
            access: &input.gpu_access,
            container: "toolkit-validation",
        }),
    })
}

/// The init containers, in NVIDIA's order: driver, toolkit, cuda, and plugin unless the device
/// plugin is disabled.
fn checks(input: &Input) -> Vec<Container> {
    let user = &input.check_env;
    let mut checks = vec![
        check(
            input,
            component::DRIVER,
            &user.driver,
            &[
                (names::WITH_WAIT, "true".to_owned()),
                (
                    names::DRIVER_MANAGED_BY_OPERATOR,
                    input.driver_managed.to_string(),
                ),
            ],
        ),
        check(
            input,
            component::TOOLKIT,
            &user.toolkit,
            &[
                ("NVIDIA_VISIBLE_DEVICES", "all".to_owned()),
                (names::WITH_WAIT, "false".to_owned()),
            ],
        ),
        check(
            input,
            component::CUDA,
            &user.cuda,
            &workload_env(input, &[(names::WITH_WAIT, "false".to_owned())]),
        ),
    ];
    if input.plugin_enabled {
        checks.push(check(
            input,
            component::PLUGIN,
            &user.plugin,
            &workload_env(
                input,
                &[
                    (names::WITH_WAIT, "false".to_owned()),
                    (names::WITH_WORKLOAD, "false".to_owned()),
                    (names::MIG_STRATEGY, input.mig_strategy.as_str().to_owned()),
                ],
            ),
        ));
    }
    if let Some(driver) = checks.first_mut() {
        driver
            .volume_mounts
            .get_or_insert_with(Vec::new)
            .push(VolumeMount {
                name: host_paths::HOST_DEV_CHAR_VOLUME.to_owned(),
                mount_path: "/host-dev-char".to_owned(),
                ..VolumeMount::default()
            });
    }
    checks
}

/// `extra` plus what the `cuda` and `plugin` checks give their workload pods: the validator's
/// pull policy and pull secrets, and the RuntimeClass the validator's own pods run with.
fn workload_env(input: &Input, extra: &[(&'static str, String)]) -> Vec<(&'static str, String)> {
    let mut env = extra.to_vec();
    if let Some(class) = input.gpu_access.runtime_class() {
        env.push((names::VALIDATOR_RUNTIME_CLASS, class.to_owned()));
    }
    env.push((
        names::VALIDATOR_IMAGE_PULL_POLICY,
        input.component.pull_policy.to_owned(),
    ));
    let secrets = &input.component.pull_secrets;
    if !secrets.is_empty() {
        env.push((names::VALIDATOR_IMAGE_PULL_SECRETS, secrets.join(",")));
    }
    env
}

/// One `<component>-validation` init container.
fn check(
    input: &Input,
    name: &str,
    user: &[SpecEnvVar],
    extra: &[(&'static str, String)],
) -> Container {
    let mut defaults = vec![
        (names::COMPONENT, name.to_owned()),
        (names::OUTPUT_DIR, VALIDATIONS.to_owned()),
    ];
    defaults.extend(extra.iter().cloned());
    let mut env = daemonset::merge_env(&defaults, user);
    env.push(field_env(names::NODE_NAME, "spec.nodeName"));
    env.push(field_env(names::OPERATOR_NAMESPACE, "metadata.namespace"));
    env.push(EnvVar {
        name: names::VALIDATOR_IMAGE.to_owned(),
        value: Some(input.image.clone()),
        value_from: None,
    });
    if input.lift_startup_taint {
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
            driver_root_mount(),
            host_root_mount(),
        ]),
        ..Container::default()
    }
}

/// The GPU health agent's container name.
pub const HEALTH_CONTAINER: &str = "gpu-health";

/// The GPU health agent: `gpu-operator-validator health` from the operator's own image, reading
/// NVML from the host's (or the driver container's) root, writing its own Node's conditions.
fn health_agent(health: &HealthAgent) -> Container {
    let mut env = vec![
        field_env(names::NODE_NAME, "spec.nodeName"),
        field_env(names::OPERATOR_NAMESPACE, "metadata.namespace"),
        plain_env(
            "HEALTH_POLL_SECONDS",
            health.poll_interval_seconds.to_string(),
        ),
        plain_env(names::HOST_ROOT_CTR_PATH, "/host".to_owned()),
        plain_env(
            names::DRIVER_INSTALL_DIR_CTR_PATH,
            "/run/nvidia/driver".to_owned(),
        ),
    ];
    if health.taint_unhealthy {
        env.push(plain_env("HEALTH_TAINT_UNHEALTHY", "true".to_owned()));
    }
    Container {
        name: HEALTH_CONTAINER.to_owned(),
        image: Some(health.image.clone()),
        command: Some(vec![
            "gpu-operator-validator".to_owned(),
            "health".to_owned(),
        ]),
        env: Some(env),
        // Privileged for the GPUs' device nodes, which NVML opens.
        security_context: Some(root()),
        volume_mounts: Some(vec![driver_root_mount(), host_root_mount()]),
        ..Container::default()
    }
}

fn plain_env(name: &str, value: String) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value: Some(value),
        value_from: None,
    }
}

fn driver_root_mount() -> VolumeMount {
    VolumeMount {
        name: "driver-install-dir".to_owned(),
        mount_path: "/run/nvidia/driver".to_owned(),
        mount_propagation: Some("HostToContainer".to_owned()),
        ..VolumeMount::default()
    }
}

fn host_root_mount() -> VolumeMount {
    VolumeMount {
        name: "host-root".to_owned(),
        mount_path: "/host".to_owned(),
        read_only: Some(true),
        mount_propagation: Some("HostToContainer".to_owned()),
        ..VolumeMount::default()
    }
}

/// `sh -c`, the busybox shell of both validator images.
fn sh() -> Vec<String> {
    vec!["sh".to_owned(), "-c".to_owned()]
}

/// Validation runs as root and privileged, as NVIDIA's does (it loads and inspects the driver).
fn root() -> SecurityContext {
    SecurityContext {
        run_as_user: Some(0),
        ..pod::privileged()
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

#[cfg(test)]
mod tests;
