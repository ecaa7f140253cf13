//! The driver pod's two main containers: the `k8s-driver-manager` init container, which makes the
//! node safe for a driver (re)load (evicting GPU pods, pausing operands, unloading an old driver),
//! and `nvidia-driver-ctr`, which installs and loads the driver and keeps it loaded.

use gpu_operator_api::spec::KernelModuleType;
use gpu_operator_core::build::{
    daemonset::{field_env, merge_env},
    pod::mount,
};
use k8s_openapi::api::core::v1::{
    Container, EnvVar, ExecAction, Lifecycle, LifecycleHandler, Probe, VolumeMount,
};

use super::{
    super::{Input, settings::ProbeTimings},
    config_map::SCRIPT_KEY,
    parts::{exec_probe, privileged, propagated, read_only},
};

/// Name of the driver container (NVIDIA's, also the pod's default container).
pub const DRIVER_CONTAINER: &str = "nvidia-driver-ctr";
/// Name of the driver manager init container.
pub const MANAGER_CONTAINER: &str = "k8s-driver-manager";
/// Where the startup probe script is mounted.
const PROBE_SCRIPT: &str = "/usr/local/bin/startup-probe.sh";

/// The `k8s-driver-manager` init container: NVIDIA's defaults (evict GPU pods, no drain), the
/// RDMA flags, then `driver.manager.env`, which wins by name.
pub fn manager(input: &Input, image: &str) -> Container {
    let mut defaults = vec![
        ("NVIDIA_VISIBLE_DEVICES", "void".to_owned()),
        ("ENABLE_GPU_POD_EVICTION", "true".to_owned()),
        ("ENABLE_AUTO_DRAIN", "false".to_owned()),
        ("DRAIN_USE_FORCE", "false".to_owned()),
        ("DRAIN_POD_SELECTOR_LABEL", String::new()),
        ("DRAIN_TIMEOUT_SECONDS", "0s".to_owned()),
        ("DRAIN_DELETE_EMPTYDIR_DATA", "false".to_owned()),
    ];
    let (rdma, host_mofed) = (input.rdma.enabled(), input.rdma.host_mofed());
    if rdma {
        defaults.push(("GPU_DIRECT_RDMA_ENABLED", "true".to_owned()));
    }
    if host_mofed {
        defaults.push(("USE_HOST_MOFED", "true".to_owned()));
    }
    let mut env = vec![field_env("NODE_NAME", "spec.nodeName")];
    env.extend(merge_env(&defaults, &input.manager_env));
    env.push(field_env("OPERATOR_NAMESPACE", "metadata.namespace"));
    Container {
        name: MANAGER_CONTAINER.to_owned(),
        image: Some(image.to_owned()),
        command: Some(vec!["driver-manager".to_owned()]),
        args: Some(vec!["uninstall_driver".to_owned()]),
        env: Some(env),
        security_context: Some(privileged()),
        volume_mounts: Some(vec![
            propagated(mount("run-nvidia", "/run/nvidia"), "Bidirectional"),
            propagated(read_only(mount("host-root", "/host")), "HostToContainer"),
            mount("host-sys", "/sys"),
            propagated(
                mount("run-mellanox-drivers", "/run/mellanox/drivers"),
                "HostToContainer",
            ),
        ]),
        ..Container::default()
    }
}

/// The operator's env of the driver container, before `driver.env`.
fn driver_env(input: &Input) -> Vec<(&'static str, String)> {
    let module_type = input.kernel_module_type;
    let mut env = vec![(
        "KERNEL_MODULE_TYPE",
        match module_type {
            KernelModuleType::Auto => "auto",
            KernelModuleType::Open => "open",
            KernelModuleType::Proprietary => "proprietary",
        }
        .to_owned(),
    )];
    if module_type == KernelModuleType::Open {
        env.push(("OPEN_KERNEL_MODULES_ENABLED", "true".to_owned()));
    }
    if input.gdrcopy_enabled {
        env.push(("GDRCOPY_ENABLED", "true".to_owned()));
    }
    if input.gds_enabled {
        env.push(("GDS_ENABLED", "true".to_owned()));
    }
    let (rdma, host_mofed) = (input.rdma.enabled(), input.rdma.host_mofed());
    if rdma {
        env.push(("GPU_DIRECT_RDMA_ENABLED", "true".to_owned()));
    }
    if host_mofed {
        env.push(("USE_HOST_MOFED", "true".to_owned()));
    }
    env
}

/// The driver container with `extra_mounts` (user configuration) after its own.
pub fn driver(input: &Input, image: &str, extra_mounts: Vec<VolumeMount>) -> Container {
    let mut env = vec![
        field_env("NODE_NAME", "spec.nodeName"),
        field_env("NODE_IP", "status.hostIP"),
    ];
    env.extend(merge_env(&driver_env(input), &input.component.env));
    let mut mounts = vec![
        propagated(mount("run-nvidia", "/run/nvidia"), "Bidirectional"),
        mount("run-nvidia-fabricmanager", "/run/nvidia-fabricmanager"),
        mount("run-nvidia-topologyd", "/run/nvidia-topologyd"),
        mount("var-log", "/var/log"),
        mount("dev-log", "/dev/log"),
        read_only(mount("host-os-release", "/host-etc/os-release")),
        propagated(
            mount("mlnx-ofed-usr-src", "/run/mellanox/drivers/usr/src"),
            "HostToContainer",
        ),
        propagated(
            mount("run-mellanox-drivers", "/run/mellanox/drivers"),
            "HostToContainer",
        ),
        mount("host-sys-devices-system", "/sys/devices/system"),
        mount(
            "firmware-search-path",
            "/sys/module/firmware_class/parameters/path",
        ),
        mount("nv-firmware", "/lib/firmware"),
        VolumeMount {
            sub_path: Some(SCRIPT_KEY.to_owned()),
            ..mount("driver-startup-probe-script", PROBE_SCRIPT)
        },
    ];
    mounts.extend(extra_mounts);
    let args = if input.component.args.is_empty() {
        vec!["init".to_owned()]
    } else {
        input.component.args.clone()
    };
    let check: &[&str] = &["sh", PROBE_SCRIPT];
    Container {
        name: DRIVER_CONTAINER.to_owned(),
        image: Some(image.to_owned()),
        command: Some(vec!["nvidia-driver".to_owned()]),
        args: Some(args),
        env: Some(env),
        security_context: Some(privileged()),
        volume_mounts: Some(mounts),
        startup_probe: Some(probe(check, (60, 10, 60, 1, 120), &input.probes.startup)),
        liveness_probe: input
            .probes
            .liveness
            .map(|p| probe(check, (0, 10, 1, 1, 3), &p)),
        readiness_probe: input
            .probes
            .readiness
            .map(|p| probe(check, (0, 10, 1, 1, 3), &p)),
        lifecycle: Some(Lifecycle {
            pre_stop: Some(LifecycleHandler {
                exec: Some(ExecAction {
                    command: Some(vec![
                        "/bin/sh".to_owned(),
                        "-c".to_owned(),
                        "rm -f /run/nvidia/validations/.driver-ctr-ready \
                         /run/nvidia/validations/.driver-daemons-status"
                            .to_owned(),
                    ]),
                }),
                ..LifecycleHandler::default()
            }),
            ..Lifecycle::default()
        }),
        ..Container::default()
    }
}

/// A probe running `command`: `defaults`, with each timing the user gave replacing its default,
/// as NVIDIA applies `driver.{startup,liveness,readiness}Probe`. NVIDIA's driver has only a
/// startup probe; a liveness or readiness probe asked for runs the same check.
fn probe(command: &[&str], defaults: super::parts::Timings, user: &ProbeTimings) -> Probe {
    let mut probe = exec_probe(command, defaults);
    let set = |field: &mut Option<i32>, value: Option<i32>| {
        if value.is_some() {
            *field = value;
        }
    };
    set(&mut probe.initial_delay_seconds, user.initial_delay_seconds);
    set(&mut probe.period_seconds, user.period_seconds);
    set(&mut probe.timeout_seconds, user.timeout_seconds);
    set(&mut probe.success_threshold, user.success_threshold);
    set(&mut probe.failure_threshold, user.failure_threshold);
    probe
}

/// Sets `name=value` on `container`, replacing a variable of that name.
pub fn set_env(container: &mut Container, name: &str, value: &str) {
    let env = container.env.get_or_insert_with(Vec::new);
    env.retain(|e| e.name != name);
    env.push(EnvVar {
        name: name.to_owned(),
        value: Some(value.to_owned()),
        value_from: None,
    });
}
