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

    /// Whether `target` logs at `level` under `filter`, asked of a subscriber built with it.
    fn enabled(filter: &str, target: &str, level: tracing::Level) -> bool {
        use tracing_subscriber::layer::SubscriberExt as _;
        let subscriber = tracing_subscriber::registry().with(parse_filter(filter).unwrap());
        tracing::subscriber::with_default(subscriber, || target_enabled(target, level))
    }

    /// `tracing::enabled!` needs a literal target; the targets asked about are listed here.
    fn target_enabled(target: &str, level: tracing::Level) -> bool {
        macro_rules! ask {
            ($target:literal) => {
                match level {
                    tracing::Level::ERROR => tracing::enabled!(target: $target, tracing::Level::ERROR),
                    tracing::Level::WARN => tracing::enabled!(target: $target, tracing::Level::WARN),
                    tracing::Level::INFO => tracing::enabled!(target: $target, tracing::Level::INFO),
                    tracing::Level::DEBUG => tracing::enabled!(target: $target, tracing::Level::DEBUG),
                    tracing::Level::TRACE => tracing::enabled!(target: $target, tracing::Level::TRACE),
                }
            };
        }
        match target {
            "kube" => ask!("kube"),
            "gpu_operator_core" => ask!("gpu_operator_core"),
            "gpu_operator_core::apply" => ask!("gpu_operator_core::apply"),
            _ => ask!("other"),
        }
    }

    #[test]
    fn levels_and_rust_log_syntax_enable_what_they_say() {
        use tracing::Level;
        // A plain level: that level and above, everywhere.
        assert!(enabled("info", "other", Level::INFO));
        assert!(!enabled("info", "other", Level::DEBUG));
        assert!(enabled("debug", "kube", Level::DEBUG));
        // RUST_LOG syntax: a default and a per-target override, in both directions.
        assert!(enabled("warn,kube=debug", "kube", Level::DEBUG));
        assert!(!enabled("warn,kube=debug", "other", Level::INFO));
        assert!(enabled("warn,kube=debug", "other", Level::WARN));
        assert!(!enabled("debug,kube=error", "kube", Level::WARN));
        // A target prefix covers its modules; nothing else is enabled without a default.
        assert!(enabled(
            "gpu_operator_core=trace",
            "gpu_operator_core::apply",
            Level::TRACE
        ));
        assert!(!enabled("gpu_operator_core=trace", "kube", Level::ERROR));
        assert_eq!(
            parse_filter("warn,kube=debug").unwrap().max_level_hint(),
            Some(tracing_subscriber::filter::LevelFilter::DEBUG)
        );
    }

    #[test]
    fn rejects_nonsense_with_a_hint() {
        let error = parse_filter("info,kube=loud").unwrap_err().to_string();
        assert!(
            error.contains("invalid log level `info,kube=loud`"),
            "{error}"
        );
    }
}
