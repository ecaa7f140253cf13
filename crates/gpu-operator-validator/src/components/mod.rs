//! The four checks and what they return: [`Passed`] (the reason, the message and the status
//! file's content) or [`Failed`] (the exact reason and message, and whether retrying can help).

pub mod cuda;
pub mod driver;
mod driver_container;
pub mod plugin;
pub mod toolkit;

/// A check passed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Passed {
    /// PascalCase reason of the True condition.
    pub reason: &'static str,
    /// What was validated, e.g. the driver version and GPU count.
    pub message: String,
    /// Content of the status file (`KEY=VALUE` lines for `driver-ready`, else empty).
    pub status_file: String,
}

/// A check failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failed {
    /// PascalCase reason of the False condition.
    pub reason: &'static str,
    /// The exact failure.
    pub message: String,
    /// Retrying cannot help (a configuration problem): `WITH_WAIT` does not loop on it.
    pub permanent: bool,
}

impl Failed {
    /// A failure that may go away (the usual case).
    pub fn new(reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
            permanent: false,
        }
    }

    /// A failure that only a configuration change fixes.
    pub fn permanent(reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            permanent: true,
            ..Self::new(reason, message)
        }
    }
}

/// A Kubernetes client error in one line: the API's code, reason and message when it answered.
pub fn api_error(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} {}: {}", s.code, s.reason, s.message),
        other => other.to_string(),
    }
}

/// The result of one check.
pub type Outcome = Result<Passed, Failed>;

/// A passing outcome with an empty status file.
pub fn passed(reason: &'static str, message: impl Into<String>) -> Outcome {
    Ok(Passed {
        reason,
        message: message.into(),
        status_file: String::new(),
    })
}
