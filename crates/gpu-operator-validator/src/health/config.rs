//! The health agent's settings, from its arguments and environment.

use std::{ffi::OsString, path::PathBuf, time::Duration};

use gpu_operator_api::validator::env;

/// How often the agent polls, by default.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(30);
/// The variable that sets it.
pub const INTERVAL_ENV: &str = "HEALTH_POLL_SECONDS";

/// The variable that turns the unhealthy taint on (`true`).
pub const TAINT_ENV: &str = "HEALTH_TAINT_UNHEALTHY";

/// What the agent needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthConfig {
    /// Its node; without it (host runs) nothing is written.
    pub node_name: Option<String>,
    /// Time between polls (the XID wait).
    pub interval: Duration,
    /// Poll a fixed number of times with a report on stdout each, then exit.
    pub once: bool,
    /// How many polls `--once` makes (`--polls N`, default 1).
    pub polls: u32,
    /// Where the host's root is mounted.
    pub host_root: PathBuf,
    /// Where a containerized driver's root is mounted.
    pub driver_root: PathBuf,
    /// `HEALTH_TAINT_UNHEALTHY`: taint the node while `GPUHealthy` is False.
    pub taint_unhealthy: bool,
    /// `OPERATOR_NAMESPACE`: where the agent records its Events (none without it).
    pub namespace: Option<String>,
}

/// Parses `health [--once]`'s arguments (after the subcommand) and the environment.
pub fn parse(
    args: &[String],
    var: impl Fn(&str) -> Option<OsString>,
) -> Result<HealthConfig, String> {
    let text = |name: &str| {
        var(name)
            .map(|v| v.to_string_lossy().trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    let usage = "usage: gpu-operator-validator health [--once [--polls N]]";
    let mut once = false;
    let mut polls = 1;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--once" => once = true,
            "--polls" => {
                polls = args
                    .next()
                    .and_then(|n| n.parse::<u32>().ok())
                    .filter(|n| *n > 0)
                    .ok_or_else(|| format!("--polls takes a positive number; {usage}"))?;
            }
            other => return Err(format!("unexpected argument `{other}`; {usage}")),
        }
    }
    let interval = match text(INTERVAL_ENV) {
        None => DEFAULT_INTERVAL,
        Some(v) => match v.parse::<u64>() {
            Ok(secs @ 1..) => Duration::from_secs(secs),
            _ => {
                return Err(format!(
                    "{INTERVAL_ENV}={v:?} is not a positive whole number of seconds (default 30)"
                ));
            }
        },
    };
    Ok(HealthConfig {
        node_name: text(env::NODE_NAME),
        interval,
        once,
        polls,
        host_root: text(env::HOST_ROOT_CTR_PATH).map_or_else(|| "/host".into(), PathBuf::from),
        driver_root: text(env::DRIVER_INSTALL_DIR_CTR_PATH)
            .map_or_else(|| "/run/nvidia/driver".into(), PathBuf::from),
        taint_unhealthy: text(TAINT_ENV).is_some_and(|v| v == "true"),
        namespace: text(env::OPERATOR_NAMESPACE),
    })
}

impl HealthConfig {
    /// The NVML library: a containerized driver's, the host's, else the soname.
    pub fn library(&self) -> PathBuf {
        crate::host::find_nvml(&self.driver_root)
            .or_else(|| crate::host::find_nvml(&self.host_root))
            .unwrap_or_else(|| PathBuf::from(crate::host::NVML_LIBRARY))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| OsString::from(v))
        }
    }

    #[test]
    fn defaults_and_overrides() {
        let cfg = parse(&[], vars(&[])).unwrap();
        assert_eq!(cfg.interval, DEFAULT_INTERVAL);
        assert!(!cfg.once && cfg.node_name.is_none());
        let cfg = parse(
            &["--once".into()],
            vars(&[("HEALTH_POLL_SECONDS", "5"), ("NODE_NAME", "gpu-1")]),
        )
        .unwrap();
        assert_eq!(cfg.interval, Duration::from_secs(5));
        assert!(cfg.once);
        assert_eq!(cfg.polls, 1);
        assert_eq!(cfg.node_name.as_deref(), Some("gpu-1"));
        let cfg = parse(&["--once".into(), "--polls".into(), "3".into()], vars(&[])).unwrap();
        assert_eq!(cfg.polls, 3);
        assert!(parse(&["--polls".into(), "0".into()], vars(&[])).is_err());
    }

    #[test]
    fn bad_input_is_named() {
        let err = parse(&[], vars(&[("HEALTH_POLL_SECONDS", "0")])).unwrap_err();
        assert!(err.contains("HEALTH_POLL_SECONDS"), "{err}");
        let err = parse(&["--loop".into()], vars(&[])).unwrap_err();
        assert!(err.contains("--loop"), "{err}");
    }
}
