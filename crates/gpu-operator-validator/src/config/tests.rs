//! Tests of the configuration parser: NVIDIA's defaults, every variable, and the errors.

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
        other => panic!("expected a run, got {other:?}"),
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

#[test]
fn metrics_is_the_exporter_with_nvidias_defaults() {
    let Invocation::Metrics(m) =
        parse_with(&[], &[("COMPONENT", "metrics"), ("NODE_NAME", "n")]).unwrap()
    else {
        panic!("expected the metrics component");
    };
    assert_eq!(m.port, 8000);
    assert!(m.device_plugin_enabled);
    assert_eq!(m.checks.component, Component::Driver);
    assert_eq!(m.checks.node_name.as_deref(), Some("n"));
    assert!(
        !m.checks.report_conditions && !m.checks.lift_startup_taint,
        "the exporter only observes"
    );
    assert_eq!(m.checks.host_root_ctr_path, PathBuf::from("/host"));

    let Invocation::Metrics(m) = parse_with(
        &["metrics"],
        &[
            ("COMPONENT", "driver"),
            ("METRICS_PORT", "9100"),
            ("DEVICE_PLUGIN_ENABLED", "false"),
        ],
    )
    .unwrap() else {
        panic!("the subcommand selects metrics");
    };
    assert_eq!((m.port, m.device_plugin_enabled), (9100, false));
    assert_eq!(
        parse_with(&["metrics"], &[("METRICS_PORT", "http")]),
        Err(ConfigError::InvalidPort("http".into()))
    );
    let err = parse_with(&["metrics"], &[("DEVICE_PLUGIN_ENABLED", "off")]).unwrap_err();
    assert!(err.to_string().contains("DEVICE_PLUGIN_ENABLED"), "{err}");
}

#[test]
fn lifecycle_subcommands_take_the_output_dir_and_reject_extra_arguments() {
    assert_eq!(parse_with(&["idle"], &[]), Ok(Invocation::Idle));
    assert_eq!(
        parse_with(&["cleanup"], &[("OUTPUT_DIR", "/tmp/v")]),
        Ok(Invocation::Cleanup("/tmp/v".into()))
    );
    assert_eq!(
        parse_with(&["wait", "toolkit"], &[]),
        Ok(Invocation::Wait {
            component: "toolkit".into(),
            dir: "/run/nvidia/validations".into()
        })
    );
    for bad in [&["wait"][..], &["wait", "../x"], &["wait", "a", "b"]] {
        assert!(
            matches!(
                parse_with(bad, &[]),
                Err(ConfigError::UnexpectedArgument(_))
            ),
            "{bad:?}"
        );
    }
}

#[test]
fn sandbox_components_are_nvidias_names_and_need_the_node() {
    for (name, component) in [
        ("vfio-pci", Component::VfioPci),
        ("vgpu-manager", Component::VgpuManager),
        ("vgpu-devices", Component::VgpuDevices),
        ("cc-manager", Component::CcManager),
    ] {
        let c = config(&[], &[("COMPONENT", name), ("NODE_NAME", "n")]);
        assert_eq!(c.component, component);
        assert!(c.component.is_sandbox());
        assert_eq!(
            parse_with(&[name], &[]),
            Err(ConfigError::Missing {
                name: "NODE_NAME",
                component
            })
        );
    }
    assert!(!Component::Driver.is_sandbox() && !Component::Plugin.is_sandbox());
}

#[test]
fn the_default_workload_is_nvidias_vm_passthrough_unless_set() {
    let c = config(&["vfio-pci"], &[("NODE_NAME", "n")]);
    assert_eq!(c.default_workload, WorkloadConfig::VmPassthrough);
    let c = config(
        &["vgpu-devices"],
        &[
            ("NODE_NAME", "n"),
            ("DEFAULT_GPU_WORKLOAD_CONFIG", "vm-vgpu"),
        ],
    );
    assert_eq!(c.default_workload, WorkloadConfig::VmVgpu);
    assert_eq!(
        parse_with(
            &["vgpu-devices"],
            &[("NODE_NAME", "n"), ("DEFAULT_GPU_WORKLOAD_CONFIG", "vgpu")]
        ),
        Err(ConfigError::InvalidWorkloadConfig("vgpu".into()))
    );
}

#[test]
fn sysfs_is_sysfs_root_else_under_the_host_mount_else_the_containers() {
    let host = tempfile::tempdir().unwrap();
    let host_path = host.path().to_str().unwrap();
    let c = config(
        &["vfio-pci"],
        &[("NODE_NAME", "n"), ("HOST_ROOT_CTR_PATH", host_path)],
    );
    assert_eq!(
        c.sysfs_root(),
        PathBuf::from("/sys"),
        "no sys under the mount"
    );
    std::fs::create_dir(host.path().join("sys")).unwrap();
    assert_eq!(c.sysfs_root(), host.path().join("sys"));
    let c = config(
        &["vfio-pci"],
        &[
            ("NODE_NAME", "n"),
            ("HOST_ROOT_CTR_PATH", host_path),
            ("SYSFS_ROOT", "/fake/sys"),
        ],
    );
    assert_eq!(c.sysfs_root(), PathBuf::from("/fake/sys"));
}
