//! The validator's configuration: NVIDIA's environment variables (plus ours) and the optional
//! component subcommand, parsed by a pure function so every default and error is testable.

use std::{ffi::OsString, path::PathBuf, time::Duration};

use gpu_operator_api::{
    spec::{HostPathsSpec, WorkloadConfig},
    validator::{component::METRICS, env},
};

mod component;
pub use component::Component;

/// A configuration problem: the process exits with [`crate::EXIT_USAGE`].
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    /// Neither a subcommand nor `COMPONENT` names a component.
    #[error(
        "no component to validate: pass one of driver, toolkit, cuda, plugin, vfio-pci, vgpu-manager, vgpu-devices, cc-manager, metrics or set COMPONENT"
    )]
    MissingComponent,
    /// The component is not one we validate.
    #[error(
        "unknown component `{0}`: expected driver, toolkit, cuda, plugin, vfio-pci, vgpu-manager, vgpu-devices, cc-manager or metrics"
    )]
    UnknownComponent(String),
    /// A boolean variable has a value that is not a boolean.
    #[error("{name}={value:?} is not a boolean (use true or false)")]
    InvalidBool {
        /// The variable.
        name: &'static str,
        /// Its value.
        value: String,
    },
    /// A number of seconds is not a non-negative integer.
    #[error("{name}={value:?} is not a whole number of seconds")]
    InvalidSeconds {
        /// The variable.
        name: &'static str,
        /// Its value.
        value: String,
    },
    /// `METRICS_PORT` is not a port number.
    #[error("METRICS_PORT={0:?} is not a port number (0 to 65535; the default is 8000)")]
    InvalidPort(String),
    /// `DEFAULT_GPU_WORKLOAD_CONFIG` is not a workload config.
    #[error(
        "DEFAULT_GPU_WORKLOAD_CONFIG={0:?} is not a workload config: expected container, vm-passthrough or vm-vgpu"
    )]
    InvalidWorkloadConfig(String),
    /// `MIG_STRATEGY` is not `none`, `single` or `mixed`.
    #[error("MIG_STRATEGY={0:?} is not a MIG strategy: expected none, single or mixed")]
    InvalidMigStrategy(String),
    /// A component needs a variable that is unset or empty.
    #[error("{name} must be set for the {component} component")]
    Missing {
        /// The variable.
        name: &'static str,
        /// The component that needs it.
        component: Component,
    },
    /// More than one positional argument, or an unknown flag.
    #[error(
        "unexpected argument `{0}`; usage: gpu-operator-validator [driver|toolkit|cuda|plugin|vfio-pci|vgpu-manager|vgpu-devices|cc-manager|metrics]"
    )]
    UnexpectedArgument(String),
}

/// The device plugin's MIG strategy, which decides the resource names the node must advertise
/// (the API's type: its default is the one rule for an unset strategy).
pub use gpu_operator_api::spec::MigStrategy;

/// Settings of the workload pods of the `cuda` and `plugin` checks.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WorkloadSettings {
    /// Image of the CUDA check pod (`CUDA_VALIDATOR_IMAGE`, else `VALIDATOR_IMAGE`).
    pub cuda_image: Option<String>,
    /// Image of the device plugin check pod (`VALIDATOR_IMAGE`).
    pub plugin_image: Option<String>,
    /// `VALIDATOR_IMAGE_PULL_POLICY`.
    pub pull_policy: Option<String>,
    /// `VALIDATOR_IMAGE_PULL_SECRETS`, split on commas.
    pub pull_secrets: Vec<String>,
    /// `VALIDATOR_RUNTIME_CLASS`.
    pub runtime_class: Option<String>,
    /// `WORKLOAD_COMMAND`, split on whitespace.
    pub command: Vec<String>,
    /// `WORKLOAD_TIMEOUT_SECONDS`.
    pub timeout: Duration,
}

/// Everything the validator reads from its environment and arguments.
#[allow(
    clippy::struct_excessive_bools,
    reason = "one field per boolean variable of NVIDIA's"
)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The component to check.
    pub component: Component,
    /// Retry until the check passes.
    pub with_wait: bool,
    /// Run the workload pod of the `cuda` and `plugin` checks.
    pub with_workload: bool,
    /// The node this validator runs on.
    pub node_name: Option<String>,
    /// The operator's namespace (workload pods).
    pub namespace: Option<String>,
    /// The validator's own pod (owner of workload pods).
    pub pod_name: Option<String>,
    /// Directory of the status files.
    pub output_dir: PathBuf,
    /// Pause between retries.
    pub sleep_interval: Duration,
    /// The device plugin's MIG strategy.
    pub mig_strategy: MigStrategy,
    /// The host's root as a host path (for `driver-ready`).
    pub host_root: PathBuf,
    /// Where the host's root is mounted in this container.
    pub host_root_ctr_path: PathBuf,
    /// Host path of a containerized driver.
    pub driver_install_dir: PathBuf,
    /// Where that driver is mounted in this container.
    pub driver_install_dir_ctr_path: PathBuf,
    /// Check the driver with `nvidia-smi --version` only.
    pub skip_gpu_init: bool,
    /// The operator deploys a driver container: wait for its `.driver-ctr-ready`.
    pub driver_managed: bool,
    /// Delete all status files first.
    pub cleanup_all: bool,
    /// Kill `nvidia-smi` after this long.
    pub smi_timeout: Duration,
    /// How long the plugin check waits for GPU capacity.
    pub resource_wait: Duration,
    /// `PATH`, where the toolkit check looks for the injected `nvidia-smi`.
    pub search_path: Option<OsString>,
    /// Workload pod settings.
    pub workload: WorkloadSettings,
    /// Write Node conditions.
    pub report_conditions: bool,
    /// Remove the startup taint once the stack is ready.
    pub lift_startup_taint: bool,
    /// The sandbox components' workload config of a node without a valid
    /// `nvidia.com/gpu.workload.config` label (`DEFAULT_GPU_WORKLOAD_CONFIG`, else NVIDIA's
    /// `vm-passthrough`).
    pub default_workload: WorkloadConfig,
    /// `SYSFS_ROOT`: the host's sysfs, when set; see [`Config::sysfs_root`].
    pub sysfs_root: Option<PathBuf>,
}

/// The `metrics` component: NVIDIA's node status exporter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsConfig {
    /// `METRICS_PORT`: where `/metrics` is served on every address.
    pub port: u16,
    /// `DEVICE_PLUGIN_ENABLED`: when false the device count is reported as -1.
    pub device_plugin_enabled: bool,
    /// The settings of the driver check it runs (component `driver`; it never writes status
    /// files nor reports Node conditions), with the node, output dir and host root it reads.
    pub checks: Config,
}

/// The default `METRICS_PORT`, NVIDIA's.
pub const DEFAULT_METRICS_PORT: u16 = 8000;

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invocation {
    /// Run a check.
    Run(Box<Config>),
    /// Serve the node's metrics until SIGTERM.
    Metrics(Box<MetricsConfig>),
    /// Print usage.
    Help,
    /// `idle`: wait for SIGTERM.
    Idle,
    /// `cleanup`: remove the status files in this directory (`OUTPUT_DIR`).
    Cleanup(PathBuf),
    /// `wait <component>`: return once `<component>-ready` exists in the directory.
    Wait {
        /// The component whose status file to wait for.
        component: String,
        /// `OUTPUT_DIR`.
        dir: PathBuf,
    },
}

/// Usage text for `--help`.
pub const USAGE: &str = "\
usage: gpu-operator-validator [driver|toolkit|cuda|plugin|vfio-pci|vgpu-manager|vgpu-devices|cc-manager|metrics|idle|cleanup|wait <component>|discover [--once]]

`idle` waits for SIGTERM; `cleanup` removes the status files; `wait <component>` returns once
`<component>-ready` exists under OUTPUT_DIR. (The operator renders `sh -c` scripts for these, which
NVIDIA's validator image answers too; the subcommands serve pods of earlier releases.) `discover`
writes the NFD labels the operator reads (pci-10de.present, kernel-version.full,
system-os_release.*) on NODE_NAME from the host root under HOST_ROOT_CTR_PATH, every
DISCOVERY_INTERVAL_SECONDS (default 600) or once with --once.

Checks one component of the node's GPU stack, writes NVIDIA's status file under OUTPUT_DIR
(default /run/nvidia/validations) and reports Node conditions. The component comes from the
subcommand or COMPONENT. The sandbox components (vfio-pci, vgpu-manager, vgpu-devices,
cc-manager) read NODE_NAME's labels and the host's sysfs (SYSFS_ROOT, default
HOST_ROOT_CTR_PATH/sys, else /sys); the first three write the node's workload config to
OUTPUT_DIR/workload-type (DEFAULT_GPU_WORKLOAD_CONFIG when the node has no valid label). Exit codes: 0 validated, 1 validation failed, 2 bad configuration,
3 validated but the Node conditions could not be written.

`metrics` (the node status exporter) serves NVIDIA's gpu_operator_node_* gauges in Prometheus text
on :METRICS_PORT (default 8000) at /metrics, and `ok` at /healthz, until SIGTERM. It reads the
status files under OUTPUT_DIR, runs the driver check, reads NODE_NAME's GPU capacity from the API
(reported as -1 when DEVICE_PLUGIN_ENABLED=false) and counts NVIDIA PCI devices under the host root.
Environment: COMPONENT WITH_WAIT WITH_WORKLOAD NODE_NAME OPERATOR_NAMESPACE OUTPUT_DIR
SLEEP_INTERVAL_SECONDS MIG_STRATEGY HOST_ROOT HOST_ROOT_CTR_PATH DRIVER_INSTALL_DIR
DRIVER_INSTALL_DIR_CTR_PATH DRIVER_VALIDATION_SKIP_GPU_INIT DRIVER_MANAGED_BY_OPERATOR CLEANUP_ALL VALIDATOR_IMAGE
CUDA_VALIDATOR_IMAGE VALIDATOR_IMAGE_PULL_POLICY VALIDATOR_IMAGE_PULL_SECRETS
VALIDATOR_RUNTIME_CLASS WORKLOAD_COMMAND WORKLOAD_TIMEOUT_SECONDS GPU_RESOURCE_WAIT_SECONDS
NVIDIA_SMI_TIMEOUT_SECONDS POD_NAME LIFT_STARTUP_TAINT REPORT_NODE_CONDITIONS METRICS_PORT
DEVICE_PLUGIN_ENABLED DEFAULT_GPU_WORKLOAD_CONFIG SYSFS_ROOT KUBECONFIG";

/// Go's `strconv.ParseBool`, which NVIDIA's validator uses for its boolean variables.
fn parse_bool(name: &'static str, value: &str) -> Result<bool, ConfigError> {
    match value.trim() {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err(ConfigError::InvalidBool {
            name,
            value: value.to_owned(),
        }),
    }
}

/// `DEFAULT_GPU_WORKLOAD_CONFIG`, NVIDIA's `vm-passthrough` when unset.
fn default_workload(value: Option<String>) -> Result<WorkloadConfig, ConfigError> {
    value.map_or(Ok(WorkloadConfig::VmPassthrough), |v| {
        WorkloadConfig::from_name(&v).ok_or(ConfigError::InvalidWorkloadConfig(v))
    })
}

/// The non-empty items of a comma-separated list.
fn comma_list(value: Option<&str>) -> Vec<String> {
    value
        .into_iter()
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Parses the arguments (without the program name) and the environment, read through `var`.
pub fn parse<F>(args: &[String], var: F) -> Result<Invocation, ConfigError>
where
    F: Fn(&str) -> Option<OsString>,
{
    let text = |name: &str| {
        var(name)
            .map(|v| v.to_string_lossy().trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    let flag = |name: &'static str, default: bool| {
        text(name).map_or(Ok(default), |v| parse_bool(name, &v))
    };
    let seconds = |name: &'static str, default: u64| {
        text(name).map_or(Ok(Duration::from_secs(default)), |v| {
            v.parse::<u64>()
                .map(Duration::from_secs)
                .map_err(|_| ConfigError::InvalidSeconds { name, value: v })
        })
    };
    let path =
        |name: &str, default: &str| PathBuf::from(text(name).unwrap_or_else(|| default.into()));

    let output_dir = path(env::OUTPUT_DIR, "/run/nvidia/validations");
    if let Some(lifecycle) = lifecycle(args, &output_dir) {
        return lifecycle;
    }
    let mut positional = None;
    for arg in args {
        match arg.as_str() {
            "-h" | "--help" | "help" => return Ok(Invocation::Help),
            a if a.starts_with('-') || positional.is_some() => {
                return Err(ConfigError::UnexpectedArgument(a.to_owned()));
            }
            a => positional = Some(a.to_owned()),
        }
    }
    let requested = positional
        .or_else(|| text(env::COMPONENT))
        .ok_or(ConfigError::MissingComponent)?;
    // The exporter runs the driver check, so it is parsed as that component.
    let metrics = requested == METRICS;
    let component: Component = if metrics {
        Component::Driver
    } else {
        requested.parse()?
    };
    let mig_strategy = match text(env::MIG_STRATEGY) {
        None => MigStrategy::default(),
        Some(value) => value.parse().map_err(ConfigError::InvalidMigStrategy)?,
    };
    let validator_image = text(env::VALIDATOR_IMAGE);
    let workload = WorkloadSettings {
        cuda_image: text(env::CUDA_VALIDATOR_IMAGE).or_else(|| validator_image.clone()),
        plugin_image: validator_image,
        pull_policy: text(env::VALIDATOR_IMAGE_PULL_POLICY),
        pull_secrets: comma_list(text(env::VALIDATOR_IMAGE_PULL_SECRETS).as_deref()),
        runtime_class: text(env::VALIDATOR_RUNTIME_CLASS),
        command: text(env::WORKLOAD_COMMAND).map_or_else(
            || vec!["vectorAdd".to_owned()],
            |c| c.split_whitespace().map(str::to_owned).collect(),
        ),
        timeout: seconds(env::WORKLOAD_TIMEOUT_SECONDS, 300)?,
    };
    let node_name = text(env::NODE_NAME);
    let config = Config {
        component,
        with_wait: flag(env::WITH_WAIT, false)?,
        with_workload: flag(env::WITH_WORKLOAD, true)?,
        report_conditions: flag(env::REPORT_NODE_CONDITIONS, true)? && node_name.is_some(),
        node_name,
        namespace: text(env::OPERATOR_NAMESPACE),
        pod_name: text(env::POD_NAME),
        output_dir,
        sleep_interval: seconds(env::SLEEP_INTERVAL_SECONDS, 5)?,
        mig_strategy,
        host_root: path(env::HOST_ROOT, HostPathsSpec::DEFAULT_ROOT_FS),
        host_root_ctr_path: path(env::HOST_ROOT_CTR_PATH, "/host"),
        driver_install_dir: path(
            env::DRIVER_INSTALL_DIR,
            HostPathsSpec::DEFAULT_DRIVER_INSTALL_DIR,
        ),
        driver_install_dir_ctr_path: path(env::DRIVER_INSTALL_DIR_CTR_PATH, "/run/nvidia/driver"),
        skip_gpu_init: flag(env::DRIVER_VALIDATION_SKIP_GPU_INIT, false)?,
        driver_managed: flag(env::DRIVER_MANAGED_BY_OPERATOR, false)?,
        cleanup_all: flag(env::CLEANUP_ALL, false)?,
        smi_timeout: seconds(env::NVIDIA_SMI_TIMEOUT_SECONDS, 60)?,
        resource_wait: seconds(env::GPU_RESOURCE_WAIT_SECONDS, 150)?,
        search_path: var("PATH"),
        workload,
        lift_startup_taint: flag(env::LIFT_STARTUP_TAINT, false)?,
        default_workload: default_workload(text(env::DEFAULT_GPU_WORKLOAD_CONFIG))?,
        sysfs_root: text(env::SYSFS_ROOT).map(PathBuf::from),
    };
    if metrics {
        let device_plugin_enabled = flag(env::DEVICE_PLUGIN_ENABLED, true)?;
        return metrics_invocation(config, text(env::METRICS_PORT), device_plugin_enabled);
    }
    config.require_what_the_component_needs()?;
    Ok(Invocation::Run(Box::new(config)))
}

/// The subcommands of the validator pod's lifecycle (`idle`, `cleanup`, `wait <component>`), or
/// `None` for a check.
fn lifecycle(
    args: &[String],
    output_dir: &std::path::Path,
) -> Option<Result<Invocation, ConfigError>> {
    let dir = output_dir.to_path_buf();
    match args.first().map(String::as_str)? {
        "idle" if args.len() == 1 => Some(Ok(Invocation::Idle)),
        "cleanup" if args.len() == 1 => Some(Ok(Invocation::Cleanup(dir))),
        "wait" => Some(match &args[1..] {
            [component] if !component.is_empty() && !component.contains('/') => {
                Ok(Invocation::Wait {
                    component: component.clone(),
                    dir,
                })
            }
            _ => Err(ConfigError::UnexpectedArgument(args.join(" "))),
        }),
        _ => None,
    }
}

/// The `metrics` component: its port and switch, and `checks` for the driver check it runs,
/// which only observes (no Node conditions, no taint).
fn metrics_invocation(
    checks: Config,
    port: Option<String>,
    device_plugin_enabled: bool,
) -> Result<Invocation, ConfigError> {
    let port = port.map_or(Ok(DEFAULT_METRICS_PORT), |v| {
        v.parse().map_err(|_| ConfigError::InvalidPort(v))
    })?;
    Ok(Invocation::Metrics(Box::new(MetricsConfig {
        port,
        device_plugin_enabled,
        checks: Config {
            report_conditions: false,
            lift_startup_taint: false,
            ..checks
        },
    })))
}

impl Config {
    /// The host's sysfs: `SYSFS_ROOT` when set, else `sys` under the host root mount when that
    /// is a directory (as the `metrics` and `discover` components read it), else `/sys` (NVIDIA's
    /// sandbox validator containers read it there, privileged, without a host root mount).
    pub fn sysfs_root(&self) -> PathBuf {
        if let Some(root) = &self.sysfs_root {
            return root.clone();
        }
        let under_host = self.host_root_ctr_path.join("sys");
        if under_host.is_dir() {
            under_host
        } else {
            PathBuf::from("/sys")
        }
    }

    /// NVIDIA's rules: `plugin` needs the node and the namespace, `cuda` the namespace (both
    /// only when they create a workload pod or read the node here); the sandbox components read
    /// the node's labels.
    fn require_what_the_component_needs(&self) -> Result<(), ConfigError> {
        let component = self.component;
        let missing = |name| ConfigError::Missing { name, component };
        match component {
            Component::Plugin if self.node_name.is_none() => Err(missing(env::NODE_NAME)),
            Component::Plugin | Component::Cuda
                if self.with_workload && self.namespace.is_none() =>
            {
                Err(missing(env::OPERATOR_NAMESPACE))
            }
            Component::Cuda if self.with_workload && self.node_name.is_none() => {
                Err(missing(env::NODE_NAME))
            }
            c if c.is_sandbox() && self.node_name.is_none() => Err(missing(env::NODE_NAME)),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests;
