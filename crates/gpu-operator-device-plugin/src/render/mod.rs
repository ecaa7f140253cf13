//! The device plugin's objects, one file per kind, and the pod pieces both DaemonSets share.

mod config_map;
mod daemonset;
mod mps_daemonset;
mod rbac;

use gpu_operator_api::labels::operand;
use gpu_operator_core::{
    build::{
        daemonset::Identity,
        pod::{self, Finish, Gpus, Wrap, host_path},
    },
    contract::{Children, Operand as _},
};
use gpu_operator_plugin_config::config_manager;
use k8s_openapi::api::{
    apps::v1::DaemonSet,
    core::v1::{PodSpec, Volume},
};

use crate::{CONFIGS, DevicePlugin, Input};

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

/// How DaemonSet `name` of the device plugin is finished: the config manager (signalling
/// `process`, reading its configuration into `main`), then the shared steps with `devicePlugin`'s
/// component settings, the barrier its pod placed, and `devicePlugin.args` on `main` when
/// `args_to_main`.
struct Plugin<'a> {
    name: &'a str,
    main: &'a str,
    process: &'a str,
    args_to_main: bool,
}

/// The DaemonSet of `pod`, finished as `plugin` says.
fn finish(mut pod: PodSpec, input: &Input, plugin: &Plugin<'_>) -> DaemonSet {
    let wiring = config_manager::Wiring {
        main_container: plugin.main,
        process_to_signal: plugin.process,
        image: &input.image,
    };
    let configs = input.configs.as_ref().map(|_| config_manager::Configs {
        config_map: CONFIGS,
        default: &input.config_default,
    });
    config_manager::apply(&mut pod, wiring, configs);
    let steps = Finish {
        component: &input.component,
        barrier: input.shared.in_pod(),
        host_paths: input.shared.rewrite_host_paths(),
        args: plugin.args_to_main.then_some(plugin.main),
    };
    pod::finish(pod, steps).into_daemonset(Wrap {
        identity: Identity {
            name: plugin.name,
            component: DevicePlugin::NAME,
            deploy_label: operand::DEVICE_PLUGIN,
            always_on_delete: false,
        },
        daemonsets: &input.shared.daemonsets,
        gpus: Some(Gpus {
            access: &input.gpu_access,
            container: plugin.main,
        }),
    })
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
