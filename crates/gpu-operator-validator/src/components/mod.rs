//! The checks and what they return: [`Passed`] (the reason, the message, the status file to
//! write and its content) or [`Failed`] (the exact reason and message, and whether retrying can
//! help). The container stack's four (`driver`, `toolkit`, `cuda`, `plugin`) and the sandbox ones
//! (`vfio-pci`, `vgpu-manager`, `vgpu-devices`, `cc-manager`, gated by [`sandbox`]).

pub mod cc_manager;
pub mod cuda;
pub mod driver;
mod driver_container;
#[cfg(test)]
mod fake_sysfs;
pub mod plugin;
pub mod sandbox;
pub mod sysfs_pci;
pub mod toolkit;
pub mod vfio_pci;
pub mod vgpu_devices;
pub mod vgpu_manager;

/// Which status file a passing check leaves in `OUTPUT_DIR`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileToWrite {
    /// The component's own file ([`crate::status_files::file_name`]).
    ComponentFile,
    /// Another of its files (`host-vgpu-manager-ready` when the vGPU host driver is the host's).
    Other(&'static str),
    /// None: the component is not needed on this node (NVIDIA's sandbox components skip).
    Nothing,
}

/// A check passed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Passed {
    /// PascalCase reason of the True condition.
    pub reason: &'static str,
    /// What was validated, e.g. the driver version and GPU count.
    pub message: String,
    /// Content of the status file (`KEY=VALUE` lines for `driver-ready`, else empty).
    pub status_file: String,
    /// Which status file to write.
    pub file: FileToWrite,
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
        file: FileToWrite::ComponentFile,
    })
}

/// A passing outcome that writes no status file: the component is not needed here.
pub fn not_required(message: impl Into<String>) -> Outcome {
    Ok(Passed {
        reason: gpu_operator_api::validator::reason::NOT_REQUIRED,
        message: message.into(),
        status_file: String::new(),
        file: FileToWrite::Nothing,
    })
}
