//! DaemonSet `nvidia-sandbox-validator`, as NVIDIA builds it: one privileged init container per
//! sandbox check, in NVIDIA's order (`cc-manager` with `ccManager.enabled` only, `vfio-pci`,
//! `vgpu-manager`, `vgpu-devices`), each running our validator binary with its `COMPONENT` and
//! `WITH_WAIT=true`, so it retries until its check passes (a check that does not apply to the
//! node's workload type passes at once); then the idle main container. The status files they
//! leave, and `workload-type`, are what the sandbox device plugins wait on. No barrier: this is
//! the validator of the VM nodes, which run no container stack.

use gpu_operator_api::{
    labels::operand,
    spec::EnvVar as SpecEnvVar,
    validator::{component, env as names, status_file},
};
use gpu_operator_core::{
    build::{
        barrier::{VALIDATIONS_DIR, VALIDATIONS_VOLUME, volume},
        daemonset::{self, Identity, field_env, override_env},
        host_paths::{DRIVER_INSTALL_DIR_VOLUME, HOST_ROOT_VOLUME},
        pod::{self, Barrier, Finish, Wrap, host_path, mount, read_only_mount},
    },
    contract::Operand as _,
};
use k8s_openapi::api::{
    apps::v1::DaemonSet,
    core::v1::{
        Container, ExecAction, Lifecycle, LifecycleHandler, PodSpec, SELinuxOptions,
        SecurityContext, VolumeMount,
    },
};

use crate::{Input, NAME, SandboxValidator};

/// The validator binary: NVIDIA's name, which both validator images carry.
const BINARY: &str = "nvidia-validator";
/// The main container: say so, then sleep until the pod is stopped (a TERM ends it at once).
const IDLE_SCRIPT: &str = "echo all validations are successful; trap 'kill $! 2>/dev/null; exit 0' TERM INT; \
     while true; do sleep 3600 & wait $!; done";
/// Where the containerized (vGPU) driver's root is mounted.
const DRIVER_ROOT: &str = "/run/nvidia/driver";

/// The DaemonSet.
pub fn build(input: &Input) -> DaemonSet {
    let main = Container {
        name: NAME.to_owned(),
        image: Some(input.image.clone()),
        command: Some(sh()),
        args: Some(vec![IDLE_SCRIPT.to_owned()]),
        env: Some(override_env(Vec::new(), &input.component.env)),
        security_context: Some(root(false)),
        volume_mounts: Some(vec![validations_mount()]),
        lifecycle: Some(Lifecycle {
            pre_stop: Some(LifecycleHandler {
                exec: Some(ExecAction {
                    command: Some([sh(), vec![cleanup_script()]].concat()),
                }),
                ..LifecycleHandler::default()
            }),
            ..Lifecycle::default()
        }),
        ..Container::default()
    };
    let pod = PodSpec {
        service_account_name: Some(NAME.to_owned()),
        init_containers: Some(checks(input)),
        containers: vec![main],
        volumes: Some(vec![
            volume(),
            host_path(DRIVER_INSTALL_DIR_VOLUME, DRIVER_ROOT, None),
            host_path(HOST_ROOT_VOLUME, "/", None),
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
            component: SandboxValidator::NAME,
            deploy_label: operand::SANDBOX_VALIDATOR,
            always_on_delete: false,
        },
        daemonsets: &input.shared.daemonsets,
        gpus: None,
    })
}

/// The init containers, in NVIDIA's order.
fn checks(input: &Input) -> Vec<Container> {
    let (image, user) = (input.image.as_str(), &input.check_env);
    let workload = input.default_workload.as_str();
    let host_root = || VolumeMount {
        mount_propagation: Some("HostToContainer".to_owned()),
        ..read_only_mount(HOST_ROOT_VOLUME, "/host")
    };
    let driver_root = || VolumeMount {
        mount_propagation: Some("HostToContainer".to_owned()),
        ..mount(DRIVER_INSTALL_DIR_VOLUME, DRIVER_ROOT)
    };
    let mut checks = Vec::new();
    if input.cc_manager {
        // NVIDIA's API has no `validator.ccManager` section, nor does this check read the
        // default workload.
        checks.push(check(
            image,
            component::CC_MANAGER,
            None,
            &[],
            true,
            Vec::new(),
        ));
    }
    checks.extend([
        check(
            image,
            component::VFIO_PCI,
            Some(workload),
            &user.vfio_pci,
            true,
            vec![host_root()],
        ),
        check(
            image,
            component::VGPU_MANAGER,
            Some(workload),
            &user.vgpu_manager,
            true,
            vec![host_root(), driver_root()],
        ),
        check(
            image,
            component::VGPU_DEVICES,
            Some(workload),
            &user.vgpu_devices,
            false,
            Vec::new(),
        ),
    ]);
    checks
}

/// One `<component>-validation` init container: `COMPONENT`, `WITH_WAIT=true`, the status
/// directory and `DEFAULT_GPU_WORKLOAD_CONFIG` when given, `user` over them, then `NODE_NAME`;
/// `mounts` before the status directory's.
fn check(
    image: &str,
    name: &str,
    default_workload: Option<&str>,
    user: &[SpecEnvVar],
    se_linux: bool,
    mut mounts: Vec<VolumeMount>,
) -> Container {
    let mut defaults = vec![
        (names::COMPONENT, name.to_owned()),
        (names::WITH_WAIT, "true".to_owned()),
        (names::OUTPUT_DIR, VALIDATIONS_DIR.to_owned()),
    ];
    if let Some(workload) = default_workload {
        defaults.push((names::DEFAULT_GPU_WORKLOAD_CONFIG, workload.to_owned()));
    }
    let mut env = daemonset::merge_env(&defaults, user);
    env.push(field_env(names::NODE_NAME, "spec.nodeName"));
    mounts.push(validations_mount());
    Container {
        name: format!("{name}-validation"),
        image: Some(image.to_owned()),
        command: Some(vec![BINARY.to_owned()]),
        env: Some(env),
        security_context: Some(root(se_linux)),
        volume_mounts: Some(mounts),
        ..Container::default()
    }
}

/// The preStop hook: remove the sandbox checks' status files and `workload-type`, so a restarted
/// sandbox validator gates the sandbox device plugins again (only those: NVIDIA's removes every
/// file of the directory).
fn cleanup_script() -> String {
    let files = [
        status_file::VFIO_PCI,
        status_file::VGPU_MANAGER,
        status_file::HOST_VGPU_MANAGER,
        status_file::VGPU_DEVICES,
        status_file::CC_MANAGER,
        status_file::WORKLOAD_TYPE,
    ]
    .map(|file| format!("{VALIDATIONS_DIR}/{file}"));
    format!("rm -f {}", files.join(" "))
}

/// `sh -c`, the busybox shell of both validator images.
fn sh() -> Vec<String> {
    vec!["sh".to_owned(), "-c".to_owned()]
}

/// Privileged and root, as NVIDIA runs every validator container; SELinux level `s0` where
/// NVIDIA sets it (the checks that read the host).
fn root(se_linux: bool) -> SecurityContext {
    SecurityContext {
        run_as_user: Some(0),
        se_linux_options: se_linux.then(|| SELinuxOptions {
            level: Some("s0".to_owned()),
            ..SELinuxOptions::default()
        }),
        ..pod::privileged()
    }
}

fn validations_mount() -> VolumeMount {
    VolumeMount {
        mount_propagation: Some("Bidirectional".to_owned()),
        ..mount(VALIDATIONS_VOLUME, VALIDATIONS_DIR)
    }
}

#[cfg(test)]
mod tests;
