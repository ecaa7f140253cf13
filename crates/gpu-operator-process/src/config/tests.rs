//! Unit tests of `gpu-operator run`'s command line. The environment bindings are cut off so the
//! tests do not depend on the shell's `OPERATOR_NAMESPACE`, `RUST_LOG` or `POD_NAME`; one test
//! checks the bindings themselves.

use clap::{CommandFactory as _, FromArgMatches as _, Parser};

use super::*;

#[derive(Parser, Debug)]
struct Cli {
    #[command(flatten)]
    run: RunArgs,
}

const ENV_ARGS: [&str; 3] = ["operator_namespace", "log_level", "pod_name"];

fn command() -> clap::Command {
    ENV_ARGS.iter().fold(Cli::command(), |command, id| {
        command.mut_arg(*id, |arg| arg.env(None))
    })
}

fn parse(args: &[&str]) -> Result<RunArgs, clap::Error> {
    let matches = command()
        .try_get_matches_from(std::iter::once("gpu-operator").chain(args.iter().copied()))?;
    Ok(Cli::from_arg_matches(&matches)?.run)
}

#[test]
fn defaults_are_nvidias() {
    let args = parse(&["--operator-namespace", "gpu-operator"]).unwrap();
    assert_eq!(args.namespace().unwrap(), "gpu-operator");
    assert!(!args.leader_elect);
    assert_eq!(args.leader_elect_lease_name, "53822513.nvidia.com");
    assert_eq!(args.lease_namespace().unwrap(), "gpu-operator");
    assert_eq!(args.metrics_bind_address, ":8080".parse().unwrap());
    assert_eq!(args.health_probe_bind_address, ":8081".parse().unwrap());
    assert_eq!(args.log_level, "info");
    assert_eq!(args.log_format, LogFormat::Text);
    assert_eq!(args.kubeconfig, None);
    assert_eq!(args.lease_params(), LeaseParams::default());
}

#[test]
fn missing_namespace_says_what_to_do() {
    let args = parse(&[]).unwrap();
    let error = args.namespace().unwrap_err().to_string();
    assert_eq!(
        error,
        "OPERATOR_NAMESPACE is not set: set it to the namespace the operator runs in (the chart sets it from the pod's namespace)"
    );
    let empty = parse(&["--operator-namespace", " "]).unwrap();
    assert!(matches!(empty.namespace(), Err(Error::NoNamespace)));
}

#[test]
fn reads_the_documented_environment() {
    let command = Cli::command();
    let env = |id: &str| {
        let arg = command
            .get_arguments()
            .find(|arg| arg.get_id() == id)
            .unwrap();
        arg.get_env()
            .map(|name| name.to_string_lossy().into_owned())
    };
    assert_eq!(
        env("operator_namespace").as_deref(),
        Some("OPERATOR_NAMESPACE")
    );
    assert_eq!(env("pod_name").as_deref(), Some("POD_NAME"));
    assert_eq!(env("log_level").as_deref(), Some("RUST_LOG"));
}

#[test]
fn leader_elect_takes_go_bool_forms() {
    for (flags, expected) in [
        (&["--leader-elect"][..], true),
        (&["--leader-elect=true"][..], true),
        (&["--leader-elect=false"][..], false),
        (&[][..], false),
    ] {
        assert_eq!(parse(flags).unwrap().leader_elect, expected, "{flags:?}");
    }
}

#[test]
fn parses_every_flag() {
    let args = parse(&[
        "--operator-namespace=ops",
        "--leader-elect",
        "--leader-elect-lease-name=my-lease",
        "--leader-elect-namespace=kube-system",
        "--leader-lease-renew-deadline=20s",
        "--metrics-bind-address=0",
        "--health-probe-bind-address=127.0.0.1:0",
        "--log-level=debug,kube=info",
        "--log-format=json",
        "--kubeconfig=/tmp/kubeconfig",
        "--pod-name=gpu-operator-abc",
    ])
    .unwrap();
    assert!(args.leader_elect);
    assert_eq!(args.leader_elect_lease_name, "my-lease");
    assert_eq!(args.lease_namespace().unwrap(), "kube-system");
    assert_eq!(args.lease_params().renew_deadline, Duration::from_secs(20));
    assert_eq!(args.lease_params().lease_duration, Duration::from_secs(25));
    assert_eq!(args.metrics_bind_address, BindAddress::Disabled);
    assert_eq!(
        args.health_probe_bind_address,
        "127.0.0.1:0".parse().unwrap()
    );
    assert_eq!(args.log_level, "debug,kube=info");
    assert_eq!(args.log_format, LogFormat::Json);
    assert_eq!(args.kubeconfig, Some(PathBuf::from("/tmp/kubeconfig")));
    assert_eq!(args.identity(), "gpu-operator-abc");
    assert!(args.lease_identity().starts_with("gpu-operator-abc_"));
}

#[test]
fn rejects_bad_values_naming_the_flag() {
    for (flag, needle) in [
        ("--metrics-bind-address=nope", "--metrics-bind-address"),
        (
            "--health-probe-bind-address=8081",
            "--health-probe-bind-address",
        ),
        ("--log-format=xml", "--log-format"),
        ("--log-level=info,kube=loud", "--log-level"),
        (
            "--leader-lease-renew-deadline=10h",
            "--leader-lease-renew-deadline",
        ),
    ] {
        let error = parse(&[flag]).unwrap_err().to_string();
        assert!(error.contains(needle), "{flag}: {error}");
    }
}

#[test]
fn durations_parse_like_go() {
    assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
    assert_eq!(parse_duration("10").unwrap(), Duration::from_secs(10));
    assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
    assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
    assert!(parse_duration("1.5s").is_err());
    assert!(parse_duration("s").is_err());
}

#[test]
fn identity_falls_back_to_the_hostname() {
    let args = parse(&[]).unwrap();
    assert!(!args.identity().is_empty());
    assert_ne!(args.lease_identity(), args.identity());
}
