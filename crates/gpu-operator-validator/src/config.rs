//! The validator's configuration: NVIDIA's environment variables (plus ours) and the optional
//! component subcommand, parsed by a pure function so every default and error is testable.

use std::{ffi::OsString, fmt, path::PathBuf, str::FromStr, time::Duration};

use gpu_operator_api::validator::{component, env};

/// A configuration problem: the process exits with [`crate::EXIT_USAGE`].
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    /// Neither a subcommand nor `COMPONENT` names a component.
    #[error("no component to validate: pass one of driver, toolkit, cuda, plugin or set COMPONENT")]
    MissingComponent,
    /// The component is not one we validate.
    #[error("unknown component `{0}`: expected driver, toolkit, cuda or plugin")]
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
        "unexpected argument `{0}`; usage: gpu-operator-validator [driver|toolkit|cuda|plugin]"
    )]
    UnexpectedArgument(String),
}

/// What the validator checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Component {
    /// The driver.
    Driver,
    /// The container toolkit.
    Toolkit,
    /// A CUDA workload.
    Cuda,
    /// The device plugin.
    Plugin,
}

impl Component {
    /// The name used by `COMPONENT` and as subcommand.
    pub fn name(self) -> &'static str {
        match self {
            Self::Driver => component::DRIVER,
            Self::Toolkit => component::TOOLKIT,
            Self::Cuda => component::CUDA,
            Self::Plugin => component::PLUGIN,
        }
    }
}

impl fmt::Display for Component {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Component {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [Self::Driver, Self::Toolkit, Self::Cuda, Self::Plugin]
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| ConfigError::UnknownComponent(s.to_owned()))
    }
}

/// The device plugin's MIG strategy, which decides the resource names the node must advertise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MigStrategy {
    /// Every GPU is `nvidia.com/gpu`; MIG devices are ignored.
    None,
    /// MIG devices (or whole GPUs) are advertised as `nvidia.com/gpu`.
    Single,
    /// MIG devices are advertised as `nvidia.com/mig-<profile>`.
    Mixed,
}

impl MigStrategy {
    /// The name as in `MIG_STRATEGY` and GFD's `nvidia.com/mig.strategy` label.
    pub fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Single => "single",
            Self::Mixed => "mixed",
        }
    }
}

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
}

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invocation {
    /// Run a check.
    Run(Box<Config>),
    /// Print usage.
    Help,
}

/// Usage text for `--help`.
pub const USAGE: &str = "\
usage: gpu-operator-validator [driver|toolkit|cuda|plugin|idle|cleanup|wait <component>]

`idle` waits for SIGTERM (the validator pod's main container); `cleanup` removes the status files
(its preStop hook); `wait <component>` returns once `<component>-ready` exists under OUTPUT_DIR
(the barrier other operands' init containers run).

Checks one component of the node's GPU stack, writes NVIDIA's status file under OUTPUT_DIR
(default /run/nvidia/validations) and reports Node conditions. The component comes from the
subcommand or COMPONENT. Exit codes: 0 validated, 1 validation failed, 2 bad configuration,
3 validated but the Node conditions could not be written.
Environment: COMPONENT WITH_WAIT WITH_WORKLOAD NODE_NAME OPERATOR_NAMESPACE OUTPUT_DIR
SLEEP_INTERVAL_SECONDS MIG_STRATEGY HOST_ROOT HOST_ROOT_CTR_PATH DRIVER_INSTALL_DIR
DRIVER_INSTALL_DIR_CTR_PATH DRIVER_VALIDATION_SKIP_GPU_INIT DRIVER_MANAGED_BY_OPERATOR CLEANUP_ALL VALIDATOR_IMAGE
CUDA_VALIDATOR_IMAGE VALIDATOR_IMAGE_PULL_POLICY VALIDATOR_IMAGE_PULL_SECRETS
VALIDATOR_RUNTIME_CLASS WORKLOAD_COMMAND WORKLOAD_TIMEOUT_SECONDS GPU_RESOURCE_WAIT_SECONDS
NVIDIA_SMI_TIMEOUT_SECONDS POD_NAME LIFT_STARTUP_TAINT REPORT_NODE_CONDITIONS KUBECONFIG";

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
    let component: Component = positional
        .or_else(|| text(env::COMPONENT))
        .ok_or(ConfigError::MissingComponent)?
        .parse()?;
    let mig_strategy = match text(env::MIG_STRATEGY).as_deref() {
        None | Some("single") => MigStrategy::Single,
        Some("none") => MigStrategy::None,
        Some("mixed") => MigStrategy::Mixed,
        Some(other) => return Err(ConfigError::InvalidMigStrategy(other.to_owned())),
    };
    let validator_image = text(env::VALIDATOR_IMAGE);
    let workload = WorkloadSettings {
        cuda_image: text(env::CUDA_VALIDATOR_IMAGE).or_else(|| validator_image.clone()),
        plugin_image: validator_image,
        pull_policy: text(env::VALIDATOR_IMAGE_PULL_POLICY),
        pull_secrets: text(env::VALIDATOR_IMAGE_PULL_SECRETS)
            .map(|s| {
                s.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default(),
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
        output_dir: path(env::OUTPUT_DIR, "/run/nvidia/validations"),
        sleep_interval: seconds(env::SLEEP_INTERVAL_SECONDS, 5)?,
        mig_strategy,
        host_root: path(env::HOST_ROOT, "/"),
        host_root_ctr_path: path(env::HOST_ROOT_CTR_PATH, "/host"),
        driver_install_dir: path(env::DRIVER_INSTALL_DIR, "/run/nvidia/driver"),
        driver_install_dir_ctr_path: path(env::DRIVER_INSTALL_DIR_CTR_PATH, "/run/nvidia/driver"),
        skip_gpu_init: flag(env::DRIVER_VALIDATION_SKIP_GPU_INIT, false)?,
        driver_managed: flag(env::DRIVER_MANAGED_BY_OPERATOR, false)?,
        cleanup_all: flag(env::CLEANUP_ALL, false)?,
        smi_timeout: seconds(env::NVIDIA_SMI_TIMEOUT_SECONDS, 60)?,
        resource_wait: seconds(env::GPU_RESOURCE_WAIT_SECONDS, 150)?,
        search_path: var("PATH"),
        workload,
        lift_startup_taint: flag(env::LIFT_STARTUP_TAINT, false)?,
    };
    config.require_what_the_component_needs()?;
    Ok(Invocation::Run(Box::new(config)))
}

impl Config {
    /// NVIDIA's rules: `plugin` needs the node and the namespace, `cuda` the namespace (both
    /// only when they create a workload pod or read the node here).
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
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn parse_with(args: &[&str], vars: &[(&str, &str)]) -> Result<Invocation, ConfigError> {
        let vars: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), OsString::from(v)))
            .collect();
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        parse(&args, |name| vars.get(name).cloned())
    }

    fn config(args: &[&str], vars: &[(&str, &str)]) -> Config {
        match parse_with(args, vars).unwrap() {
            Invocation::Run(config) => *config,
            Invocation::Help => panic!("expected a run"),
        }
    }

    #[test]
    fn defaults_follow_nvidia() {
        let c = config(&[], &[("COMPONENT", "driver")]);
        assert_eq!(c.component, Component::Driver);
        assert!(!c.with_wait && c.with_workload && !c.cleanup_all && !c.skip_gpu_init);
        assert_eq!(c.output_dir, PathBuf::from("/run/nvidia/validations"));
        assert_eq!(c.sleep_interval, Duration::from_secs(5));
        assert_eq!(c.mig_strategy, MigStrategy::Single);
        assert_eq!(c.host_root, PathBuf::from("/"));
        assert_eq!(c.host_root_ctr_path, PathBuf::from("/host"));
        assert_eq!(c.driver_install_dir, PathBuf::from("/run/nvidia/driver"));
        assert_eq!(c.workload.command, ["vectorAdd"]);
        assert_eq!(c.workload.cuda_image, None);
        assert!(!c.report_conditions, "no NODE_NAME, nothing to report to");
        assert!(!c.lift_startup_taint);
    }

    #[test]
    fn the_subcommand_wins_over_component_and_env_values_are_read() {
        let c = config(
            &["plugin"],
            &[
                ("COMPONENT", "driver"),
                ("NODE_NAME", "n1"),
                ("OPERATOR_NAMESPACE", "gpu-operator"),
                ("WITH_WAIT", "True"),
                ("WITH_WORKLOAD", "0"),
                ("MIG_STRATEGY", "mixed"),
                ("SLEEP_INTERVAL_SECONDS", "1"),
                ("VALIDATOR_IMAGE", "nvcr.io/v:1"),
                ("VALIDATOR_IMAGE_PULL_SECRETS", "a, b,,"),
                ("WORKLOAD_COMMAND", "sh -c true"),
                ("LIFT_STARTUP_TAINT", "true"),
            ],
        );
        assert_eq!(c.component, Component::Plugin);
        assert!(c.with_wait && !c.with_workload && c.report_conditions && c.lift_startup_taint);
        assert_eq!(c.mig_strategy, MigStrategy::Mixed);
        assert_eq!(c.sleep_interval, Duration::from_secs(1));
        assert_eq!(c.workload.cuda_image.as_deref(), Some("nvcr.io/v:1"));
        assert_eq!(c.workload.pull_secrets, ["a", "b"]);
        assert_eq!(c.workload.command, ["sh", "-c", "true"]);
    }

    #[test]
    fn cuda_image_takes_precedence_and_reporting_can_be_switched_off() {
        let c = config(
            &["cuda"],
            &[
                ("NODE_NAME", "n"),
                ("OPERATOR_NAMESPACE", "ns"),
                ("VALIDATOR_IMAGE", "v"),
                ("CUDA_VALIDATOR_IMAGE", "c"),
                ("REPORT_NODE_CONDITIONS", "false"),
            ],
        );
        assert_eq!(c.workload.cuda_image.as_deref(), Some("c"));
        assert_eq!(c.workload.plugin_image.as_deref(), Some("v"));
        assert!(!c.report_conditions);
    }

    #[test]
    fn bad_input_is_a_config_error_naming_the_variable() {
        assert_eq!(parse_with(&[], &[]), Err(ConfigError::MissingComponent));
        assert_eq!(
            parse_with(&["gpu"], &[]),
            Err(ConfigError::UnknownComponent("gpu".into()))
        );
        let err = parse_with(&["driver"], &[("WITH_WAIT", "yes please")]).unwrap_err();
        assert!(err.to_string().contains("WITH_WAIT"), "{err}");
        let err = parse_with(&["driver"], &[("SLEEP_INTERVAL_SECONDS", "-1")]).unwrap_err();
        assert!(err.to_string().contains("SLEEP_INTERVAL_SECONDS"), "{err}");
        assert_eq!(
            parse_with(&["driver"], &[("MIG_STRATEGY", "MIXED")]),
            Err(ConfigError::InvalidMigStrategy("MIXED".into()))
        );
        assert_eq!(
            parse_with(&["plugin"], &[("OPERATOR_NAMESPACE", "ns")]),
            Err(ConfigError::Missing {
                name: "NODE_NAME",
                component: Component::Plugin
            })
        );
        assert_eq!(
            parse_with(&["cuda"], &[("NODE_NAME", "n")]),
            Err(ConfigError::Missing {
                name: "OPERATOR_NAMESPACE",
                component: Component::Cuda
            })
        );
        assert!(matches!(
            parse_with(&["driver", "toolkit"], &[]),
            Err(ConfigError::UnexpectedArgument(_))
        ));
        assert_eq!(parse_with(&["--help"], &[]), Ok(Invocation::Help));
    }

    #[test]
    fn cuda_and_plugin_without_workload_need_less() {
        let c = config(&["cuda"], &[("WITH_WORKLOAD", "false")]);
        assert_eq!(c.component, Component::Cuda);
        let c = config(
            &["plugin"],
            &[("WITH_WORKLOAD", "false"), ("NODE_NAME", "n")],
        );
        assert_eq!(c.component, Component::Plugin);
    }
}
