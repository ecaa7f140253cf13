//! Tracing setup: one global subscriber with an EnvFilter (`--log-level`, else `RUST_LOG`, in
//! EnvFilter syntax: `info`, `debug,kube=info`) writing text or JSON lines to stderr, and the
//! build-info line logged at startup.

use clap::ValueEnum;
use tracing_subscriber::{EnvFilter, fmt};

/// Errors of the tracing setup.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The filter is not valid EnvFilter syntax.
    #[error(
        "invalid log level `{filter}` (use a level such as `info` or `debug`, or RUST_LOG syntax such as `info,kube=debug`): {source}"
    )]
    Filter {
        /// What was given.
        filter: String,
        /// Why it is invalid.
        #[source]
        source: tracing_subscriber::filter::ParseError,
    },
    /// A global subscriber is already installed.
    #[error("the tracing subscriber was already initialised: {0}")]
    AlreadyInitialised(String),
}

/// How log lines look.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

/// Parses an EnvFilter directive string, with a message that says what to use instead.
pub fn parse_filter(filter: &str) -> Result<EnvFilter, Error> {
    EnvFilter::builder()
        .parse(filter)
        .map_err(|source| Error::Filter {
            filter: filter.to_owned(),
            source,
        })
}

/// Installs the global subscriber. Call once, first thing in `main`.
pub fn init(filter: &str, format: LogFormat) -> Result<(), Error> {
    let filter = parse_filter(filter)?;
    let builder = fmt().with_env_filter(filter).with_writer(std::io::stderr);
    let result = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .try_init(),
    };
    result.map_err(|error| Error::AlreadyInitialised(error.to_string()))
}

/// What this build is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BuildInfo {
    /// The crate version (the workspace version).
    pub version: &'static str,
    /// The git commit, when `GPU_OPERATOR_GIT_SHA` was set at build time.
    pub git_sha: Option<&'static str>,
}

/// This build.
pub const BUILD_INFO: BuildInfo = BuildInfo {
    version: env!("CARGO_PKG_VERSION"),
    git_sha: option_env!("GPU_OPERATOR_GIT_SHA"),
};

/// Logs the build info line, plus the process's identity in the cluster.
pub fn log_build_info(namespace: &str, identity: &str) {
    tracing::info!(
        version = BUILD_INFO.version,
        git_sha = BUILD_INFO.git_sha.unwrap_or("unknown"),
        namespace,
        identity,
        "starting gpu-operator"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_levels_and_rust_log_syntax() {
        for filter in [
            "info",
            "debug",
            "warn,kube=debug",
            "gpu_operator_core=trace",
        ] {
            parse_filter(filter).unwrap();
        }
    }

    #[test]
    fn rejects_nonsense_with_a_hint() {
        let error = parse_filter("info,kube=loud").unwrap_err().to_string();
        assert!(
            error.contains("invalid log level `info,kube=loud`"),
            "{error}"
        );
    }

    #[test]
    fn build_info_has_the_version() {
        assert_eq!(BUILD_INFO.version, env!("CARGO_PKG_VERSION"));
    }
}
