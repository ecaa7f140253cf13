//! The device plugin's objects, one file per kind, and the pod pieces both DaemonSets share.

mod config_map;
mod daemonset;
mod mps_daemonset;
mod rbac;

use gpu_operator_core::{
    barrier, config_manager, daemonset as common, host_paths, operand::Children,
};
use k8s_openapi::api::core::v1::{
    HostPathVolumeSource, PodSpec, SecurityContext, Volume, VolumeMount,
};

use crate::{CONFIGS, Input};

/// Everything the device plugin needs.
pub fn children(input: &Input) -> Children {
    let mut daemonsets = vec![daemonset::build(input), mps_daemonset::build(input)];
    if let Some(configs) = &input.configs {
        for ds in &mut daemonsets {
            config_manager::annotate(ds, configs);
        }
    }
    Children {
        service_accounts: rbac::service_accounts(),
        cluster_roles: rbac::cluster_roles(),
        cluster_role_bindings: rbac::cluster_role_bindings(&input.namespace),
        config_maps: std::iter::once(config_map::build())
            .chain(input.configs.iter().map(|c| c.config_map.clone()))
            .collect(),
        daemonsets,
        ..Children::default()
    }
}

/// What both DaemonSets do after building their containers: the config manager (signalling
/// `process`), `devicePlugin`'s component settings, the validator's settings on the barrier, the
/// host path rewrites and `devicePlugin.args` on the `main` container when it takes them.
fn finish(pod: &mut PodSpec, input: &Input, main: &str, process: &str, args: bool) {
    let plugin = &input.spec.device_plugin;
    let wiring = config_manager::Wiring {
        main_container: main,
        process_to_signal: process,
        image: &input.image,
    };
    let configs = input
        .configs
        .as_ref()
        .map(|_| config_manager::Configs::new(&input.spec, CONFIGS));
    config_manager::apply(pod, wiring, configs);
    common::apply_component(pod, &plugin.image, &plugin.container, plugin.host_network);
    barrier::apply_validator(pod, input.spec.validator.as_ref());
    host_paths::apply(pod, input.spec.host_paths.as_ref());
    if args {
        common::apply_args(pod, main, &plugin.container);
    }
}

/// `devicePlugin.mps.root`, by default `/run/nvidia/mps`.
fn mps_root(input: &Input) -> String {
    input
        .spec
        .device_plugin
        .mps
        .as_ref()
        .and_then(|m| m.root.clone())
        .filter(|r| !r.is_empty())
        .unwrap_or_else(|| "/run/nvidia/mps".to_owned())
}

/// The `mps-root` and `mps-shm` host volumes under `root`.
fn mps_volumes(root: &str) -> [Volume; 2] {
    [
        host_path("mps-root", root, Some("DirectoryOrCreate")),
        host_path(
            "mps-shm",
            &format!("{}/shm", root.trim_end_matches('/')),
            None,
        ),
    ]
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

fn mount(name: &str, path: &str) -> VolumeMount {
    VolumeMount {
        name: name.to_owned(),
        mount_path: path.to_owned(),
        ..VolumeMount::default()
    }
}

fn privileged() -> SecurityContext {
    SecurityContext {
        privileged: Some(true),
        ..SecurityContext::default()
    }
}
