//! DaemonSet `nvidia-dra-driver-kubelet-plugin` on the nodes labelled
//! `nvidia.com/gpu.deploy.dra-driver=true`: the `driver-validation` init container (our
//! validator, `COMPONENT=driver`, waiting for the driver and writing its `driver-ready` file),
//! then the `gpus` kubelet plugin and, with `computeDomains`, the `compute-domains` one. Each
//! plugin loads the `driver-ready` variables, registers with the kubelet under
//! `<kubeletRootDir>/plugins_registry` and `<kubeletRootDir>/plugins`, writes CDI specs to
//! `/var/run/cdi` and, unless its health check is off, answers gRPC startup and liveness probes
//! on its health port. NVIDIA's pod, with the GPUCluster's `daemonsets` settings applied by core.

use gpu_operator_api::validator::env as validator_env;
use gpu_operator_core::{
    build::{
        daemonset::{Identity, field_env, override_env},
        pod::{self, Barrier, Finish, HostPaths, Wrap, host_path, mount, propagated},
    },
    contract::Operand as _,
};
use k8s_openapi::{
    api::{
        apps::v1::DaemonSet,
        core::v1::{
            Affinity, Container, EnvVar, GRPCAction, NodeAffinity, NodeSelector,
            NodeSelectorRequirement, NodeSelectorTerm, PodSpec, Probe, SecurityContext,
            VolumeMount,
        },
    },
    apimachinery::pkg::util::intstr::IntOrString,
};

use super::{rbac::KUBELET_PLUGIN, resources};
use crate::{DraDriver, Input, feature_gates, validate::Plugin};

/// Name of the DaemonSet and its `app` label.
pub const NAME: &str = "nvidia-dra-driver-kubelet-plugin";
/// Operand of the `nvidia.com/gpu.deploy.<operand>` gate.
pub const DEPLOY_LABEL: &str = "dra-driver";
/// Where the validator's status files are, on the host and in the containers.
const VALIDATIONS: &str = "/run/nvidia/validations";
/// Where the driver's directory is mounted in the containers.
const DRIVER_ROOT_CTR: &str = "/driver-root";
/// Where the host root is mounted in the containers.
const HOST_ROOT_CTR: &str = "/host";
/// Where CDI specs go, on the host and in the containers.
const CDI_ROOT: &str = "/var/run/cdi";

/// The DaemonSet.
pub fn build(input: &Input) -> DaemonSet {
    let mut containers = vec![plugin_container(input, PluginKind::Gpus, &input.gpus)];
    if let Some(cd) = &input.compute_domains {
        containers.push(plugin_container(
            input,
            PluginKind::ComputeDomains,
            &cd.plugin,
        ));
    }
    let mut volumes = vec![
        host_path("plugins-registry", &registry_dir(input), None),
        host_path("plugins", &plugins_dir(input), None),
        host_path("cdi", CDI_ROOT, None),
        host_path("host-root", "/", None),
        host_path(
            "driver-install-dir",
            &input.driver_install_dir,
            Some("DirectoryOrCreate"),
        ),
        host_path("validations", VALIDATIONS, Some("DirectoryOrCreate")),
    ];
    if input.gate("PassthroughSupport") {
        volumes.extend([
            host_path("lib-modules", "/lib/modules/", Some("Directory")),
            host_path("sysfs", "/sys/", Some("Directory")),
            host_path("procfs", "/proc/", Some("Directory")),
        ]);
    }
    let pod = PodSpec {
        service_account_name: Some(KUBELET_PLUGIN.to_owned()),
        affinity: Some(gpu_nodes()),
        init_containers: Some(vec![driver_validation(input)]),
        containers,
        volumes: Some(volumes),
        ..PodSpec::default()
    };
    let steps = Finish {
        component: &input.component,
        barrier: Barrier::None,
        host_paths: HostPaths::ResolvedByOperand,
        args: None,
    };
    let mut ds = pod::finish(pod, steps).into_daemonset(Wrap {
        identity: Identity {
            name: NAME,
            component: DraDriver::NAME,
            deploy_label: DEPLOY_LABEL,
            always_on_delete: false,
        },
        daemonsets: &input.shared.daemonsets,
        gpus: None,
    });
    all_at_once_by_default(&mut ds);
    ds
}

/// NVIDIA rolls the kubelet plugin out on every node at once (`maxUnavailable: 100%`): prepared
/// claims survive a restart. `daemonsets.rollingUpdate.maxUnavailable` still wins when set.
fn all_at_once_by_default(ds: &mut DaemonSet) {
    let strategy = ds.spec.as_mut().and_then(|s| s.update_strategy.as_mut());
    if let Some(strategy) = strategy
        && strategy.type_.as_deref() == Some("RollingUpdate")
    {
        let rolling = strategy.rolling_update.get_or_insert_with(Default::default);
        if rolling.max_unavailable.is_none() {
            rolling.max_unavailable = Some(IntOrString::String("100%".to_owned()));
        }
    }
}

/// NVIDIA's required node affinity: a node with an NVIDIA PCI device, an NVIDIA CPU, or
/// `nvidia.com/gpu.present=true`.
fn gpu_nodes() -> Affinity {
    let term = |key: &str, value: &str| NodeSelectorTerm {
        match_expressions: Some(vec![NodeSelectorRequirement {
            key: key.to_owned(),
            operator: "In".to_owned(),
            values: Some(vec![value.to_owned()]),
        }]),
        ..NodeSelectorTerm::default()
    };
    Affinity {
        node_affinity: Some(NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms: vec![
                    term("feature.node.kubernetes.io/pci-10de.present", "true"),
                    term("feature.node.kubernetes.io/cpu-model.vendor_id", "NVIDIA"),
                    term(gpu_operator_api::labels::GPU_PRESENT, "true"),
                ],
            }),
            ..NodeAffinity::default()
        }),
        ..Affinity::default()
    }
}

fn registry_dir(input: &Input) -> String {
    format!("{}/plugins_registry", input.kubelet_root_dir)
}

fn plugins_dir(input: &Input) -> String {
    format!("{}/plugins", input.kubelet_root_dir)
}

fn literal(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        // An empty value is stored as none; rendering it so keeps the live object equal.
        value: Some(value.to_owned()).filter(|v| !v.is_empty()),
        value_from: None,
    }
}

/// The `driver-validation` init container: waits until the driver answers (`nvidia-smi
/// --version` only, as the GPUs may be bound to vfio-pci) and writes `driver-ready`, which the
/// plugins load. It runs as root to reach into the host root.
fn driver_validation(input: &Input) -> Container {
    let resources = resources::largest(
        std::iter::once(input.gpus.resources.as_ref()).chain(
            input
                .compute_domains
                .iter()
                .map(|cd| cd.plugin.resources.as_ref()),
        ),
    );
    Container {
        name: "driver-validation".to_owned(),
        image: Some(input.validator_image.clone()),
        command: Some(vec!["nvidia-validator".to_owned()]),
        env: Some(vec![
            literal(validator_env::COMPONENT, "driver"),
            literal(validator_env::WITH_WAIT, "true"),
            literal(validator_env::DRIVER_VALIDATION_SKIP_GPU_INIT, "true"),
            // NVIDIA's validator reads it (the plugins manage the device nodes); ours makes none.
            literal("DISABLE_DEV_CHAR_SYMLINK_CREATION", "true"),
            field_env(validator_env::OPERATOR_NAMESPACE, "metadata.namespace"),
            literal(validator_env::HOST_ROOT, "/"),
            literal(validator_env::DRIVER_INSTALL_DIR, &input.driver_install_dir),
            literal(validator_env::DRIVER_INSTALL_DIR_CTR_PATH, DRIVER_ROOT_CTR),
        ]),
        resources,
        security_context: Some(SecurityContext {
            run_as_user: Some(0),
            ..pod::privileged()
        }),
        volume_mounts: Some(vec![
            host_root_mount(),
            driver_root_mount(),
            mount("validations", VALIDATIONS),
        ]),
        ..Container::default()
    }
}

fn host_root_mount() -> VolumeMount {
    VolumeMount {
        read_only: Some(true),
        ..propagated(mount("host-root", HOST_ROOT_CTR), "HostToContainer")
    }
}

fn driver_root_mount() -> VolumeMount {
    propagated(
        mount("driver-install-dir", DRIVER_ROOT_CTR),
        "HostToContainer",
    )
}

/// The two kubelet plugins of the driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PluginKind {
    Gpus,
    ComputeDomains,
}

impl PluginKind {
    fn container(self) -> &'static str {
        match self {
            Self::Gpus => "gpus",
            Self::ComputeDomains => "compute-domains",
        }
    }

    fn binary(self) -> &'static str {
        match self {
            Self::Gpus => "gpu-kubelet-plugin",
            Self::ComputeDomains => "compute-domain-kubelet-plugin",
        }
    }

    fn http_endpoint(self) -> &'static str {
        match self {
            Self::Gpus => ":8080",
            Self::ComputeDomains => ":8081",
        }
    }

    /// NVIDIA's liveness probe period, in seconds.
    fn liveness_period(self) -> i32 {
        match self {
            Self::Gpus => 30,
            Self::ComputeDomains => 10,
        }
    }
}

/// Loads the `driver-ready` variables, optionally hides the driver's permission to create
/// device nodes from this container (`MASK_NVIDIA_DRIVER_PARAMS=true`, for nested setups such as
/// nvkind), then runs the plugin `binary`.
fn launch_script(binary: &str) -> String {
    [
        "set -a",
        &format!("source {VALIDATIONS}/driver-ready"),
        "set +a",
        "if [ \"${MASK_NVIDIA_DRIVER_PARAMS}\" = \"true\" ]; then",
        "  cp /proc/driver/nvidia/params /root/gpu-params",
        "  sed -i 's/^ModifyDeviceFiles: 1$/ModifyDeviceFiles: 0/' /root/gpu-params",
        "  mount --bind /root/gpu-params /proc/driver/nvidia/params",
        "fi",
        &format!("exec {binary} -v \"${{LOG_VERBOSITY}}\""),
    ]
    .join("\n")
}

fn plugin_container(input: &Input, kind: PluginKind, plugin: &Plugin) -> Container {
    let mut env = vec![
        literal("HTTP_ENDPOINT", kind.http_endpoint()),
        literal("METRICS_PATH", "/metrics"),
        literal("LOG_VERBOSITY", "4"),
        literal("MASK_NVIDIA_DRIVER_PARAMS", ""),
        literal("NVIDIA_VISIBLE_DEVICES", "void"),
        literal("CDI_ROOT", CDI_ROOT),
    ];
    if kind == PluginKind::Gpus {
        env.push(literal("HOST_ROOT", HOST_ROOT_CTR));
    }
    env.extend([
        literal("NVIDIA_MIG_CONFIG_DEVICES", "all"),
        field_env("NODE_NAME", "spec.nodeName"),
        field_env("NAMESPACE", "metadata.namespace"),
    ]);
    if kind == PluginKind::Gpus {
        env.push(literal("IMAGE_NAME", &input.image));
    }
    env.extend([
        literal("KUBELET_REGISTRAR_DIRECTORY_PATH", &registry_dir(input)),
        literal("KUBELET_PLUGINS_DIRECTORY_PATH", &plugins_dir(input)),
    ]);
    if let Some(port) = plugin.health_port {
        env.push(literal("HEALTHCHECK_PORT", &port.to_string()));
    }
    if kind == PluginKind::ComputeDomains {
        env.push(literal("GPU_CLIQUE_LABEL_ENABLED", "true"));
    }
    if !input.feature_gates.is_empty() {
        env.push(literal(
            "FEATURE_GATES",
            &feature_gates::env_value(&input.feature_gates),
        ));
    }
    let mut mounts = vec![
        mount("plugins-registry", &registry_dir(input)),
        propagated(mount("plugins", &plugins_dir(input)), "Bidirectional"),
        mount("cdi", CDI_ROOT),
        VolumeMount {
            read_only: Some(true),
            ..mount("validations", VALIDATIONS)
        },
        host_root_mount(),
        driver_root_mount(),
    ];
    if kind == PluginKind::Gpus && input.gate("PassthroughSupport") {
        mounts.extend([
            VolumeMount {
                read_only: Some(true),
                ..propagated(mount("lib-modules", "/lib/modules/"), "HostToContainer")
            },
            propagated(mount("sysfs", "/sys/"), "Bidirectional"),
            propagated(mount("procfs", "/proc/"), "Bidirectional"),
        ]);
    }
    let probe = |failure_threshold: i32, period_seconds: i32| {
        plugin.health_port.map(|port| Probe {
            grpc: Some(GRPCAction {
                port,
                service: Some("liveness".to_owned()),
            }),
            failure_threshold: Some(failure_threshold),
            period_seconds: Some(period_seconds),
            timeout_seconds: Some(10),
            ..Probe::default()
        })
    };
    Container {
        name: kind.container().to_owned(),
        image: Some(input.image.clone()),
        command: Some(vec!["bash".to_owned(), "-c".to_owned()]),
        args: Some(vec![launch_script(kind.binary())]),
        env: Some(override_env(env, &plugin.env)),
        resources: plugin.resources.clone(),
        startup_probe: probe(600, 1),
        liveness_probe: probe(3, kind.liveness_period()),
        security_context: Some(pod::privileged()),
        volume_mounts: Some(mounts),
        ..Container::default()
    }
}
