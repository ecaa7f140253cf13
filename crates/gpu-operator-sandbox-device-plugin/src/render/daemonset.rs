//! A sandbox device plugin's DaemonSet, as NVIDIA builds it: the barrier's init containers (from
//! the validator image, with `spec.validator`'s settings) first read the node's workload type,
//! which the sandbox validator writes, and on the nodes of their type wait for their check's
//! status file (`vfio-pci-ready`; for the KubeVirt plugin also `vgpu-devices-ready`); then the
//! privileged plugin container registers with the kubelet's device-plugin socket directory and
//! writes CDI specs.

use gpu_operator_core::build::{
    barrier::{VALIDATIONS_DIR, VALIDATIONS_VOLUME, volume},
    daemonset::{Identity, field_env, override_env},
    pod::{self, Finish, Wrap, host_path, mount},
};
use k8s_openapi::api::{
    apps::v1::DaemonSet,
    core::v1::{Container, EnvVar, PodSpec, SecurityContext, VolumeMount},
};

use gpu_operator_api::validator::status_file::WORKLOAD_TYPE;

use crate::{Input, flavor::Wait};

/// Seconds between two looks for a status file.
const POLL_SECONDS: u32 = 5;

/// The DaemonSet.
pub fn build(input: &Input) -> DaemonSet {
    let flavor = input.flavor;
    let mut volumes = vec![
        host_path("device-plugin", "/var/lib/kubelet/device-plugins", None),
        volume(),
    ];
    if flavor.dev_vfio {
        volumes.push(host_path("vfio", "/dev/vfio", None));
    }
    volumes.push(host_path(
        "cdi-root",
        "/var/run/cdi",
        Some("DirectoryOrCreate"),
    ));
    let pod = PodSpec {
        service_account_name: Some(flavor.account.to_owned()),
        init_containers: Some(
            flavor
                .waits
                .iter()
                .map(|w| wait(w, &input.validator_image))
                .collect(),
        ),
        containers: vec![plugin(input)],
        volumes: Some(volumes),
        ..PodSpec::default()
    };
    let steps = Finish {
        component: &input.component,
        barrier: input.shared.in_pod(),
        host_paths: input.shared.rewrite_host_paths(),
        args: Some(flavor.container),
    };
    pod::finish(pod, steps).into_daemonset(Wrap {
        identity: Identity {
            name: flavor.daemonset,
            component: flavor.component,
            deploy_label: flavor.deploy_label,
            always_on_delete: false,
        },
        daemonsets: &input.shared.daemonsets,
        gpus: None,
    })
}

/// The `sh -c` script of `wait`: wait for the node's workload type, return at once unless it is
/// `wait.workload`, else wait for `wait.file`. Shell builtins and `sleep` only.
fn script(wait: &Wait) -> String {
    let dir = VALIDATIONS_DIR;
    let kind = wait.workload.as_str();
    let file = wait.file;
    format!(
        "until [ -f {dir}/{WORKLOAD_TYPE} ]; do echo waiting for the node's workload type; \
         sleep {POLL_SECONDS}; done; \
         if [ \"$(cat {dir}/{WORKLOAD_TYPE})\" != \"{kind}\" ]; then echo not a {kind} node, \
         nothing to wait for; exit 0; fi; \
         until [ -f {dir}/{file} ]; do echo waiting for {file}; sleep {POLL_SECONDS}; done"
    )
}

/// One barrier init container: privileged, as root, without the NVIDIA runtime's devices.
fn wait(wait: &Wait, validator_image: &str) -> Container {
    Container {
        name: wait.container.to_owned(),
        image: Some(validator_image.to_owned()),
        command: Some(vec!["sh".to_owned(), "-c".to_owned()]),
        args: Some(vec![script(wait)]),
        env: Some(vec![literal("NVIDIA_VISIBLE_DEVICES", "void")]),
        security_context: Some(SecurityContext {
            run_as_user: Some(0),
            ..pod::privileged()
        }),
        volume_mounts: Some(vec![VolumeMount {
            mount_propagation: Some("HostToContainer".to_owned()),
            ..mount(VALIDATIONS_VOLUME, VALIDATIONS_DIR)
        }]),
        ..Container::default()
    }
}

/// The plugin container, with the section's `env` over NVIDIA's variables.
fn plugin(input: &Input) -> Container {
    let flavor = input.flavor;
    let mut env = vec![
        field_env("NODE_NAME", "spec.nodeName"),
        field_env("POD_NAMESPACE", "metadata.namespace"),
    ];
    if flavor.service_account_env {
        env.push(field_env("POD_SERVICE_ACCOUNT", "spec.serviceAccountName"));
    }
    let mut mounts = vec![mount("device-plugin", "/var/lib/kubelet/device-plugins")];
    if flavor.dev_vfio {
        mounts.push(mount("vfio", "/dev/vfio"));
    }
    mounts.push(mount("cdi-root", "/var/run/cdi"));
    Container {
        name: flavor.container.to_owned(),
        image: Some(input.image.clone()),
        env: Some(override_env(env, &input.component.env)),
        security_context: Some(pod::privileged()),
        volume_mounts: Some(mounts),
        ..Container::default()
    }
}

/// A variable of literal value.
fn literal(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value: Some(value.to_owned()),
        value_from: None,
    }
}

#[cfg(test)]
mod tests;
