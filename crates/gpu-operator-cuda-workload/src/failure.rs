//! Why the CUDA workload failed, each cause with its own exit code and a message that says what
//! to look at.

/// Exit code when the kernel computed a wrong result (the CUDA sample's `EXIT_FAILURE`).
pub const EXIT_WRONG_RESULT: u8 = 1;
/// Exit code when the driver library cannot be loaded.
pub const EXIT_NO_LIBRARY: u8 = 2;
/// Exit code when the driver sees no GPU.
pub const EXIT_NO_DEVICE: u8 = 3;
/// Exit code when a CUDA call failed (initialization, context, JIT, memory, launch).
pub const EXIT_CUDA_ERROR: u8 = 4;
/// Exit code when the driver library lacks an entry point the workload calls.
pub const EXIT_DRIVER_TOO_OLD: u8 = 5;
/// Exit code for an argument the command does not take.
pub const EXIT_USAGE: u8 = 64;

/// Why the workload did not pass.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Failure {
    /// `libcuda.so.1` could not be loaded.
    #[error(
        "the CUDA driver library {library} cannot be loaded ({loader}): the NVIDIA driver is not \
         installed on this node, or the container runtime did not mount it into this container \
         (runtime class `nvidia`, NVIDIA_VISIBLE_DEVICES, NVIDIA_DRIVER_CAPABILITIES=compute)"
    )]
    NoLibrary {
        /// The soname looked for.
        library: &'static str,
        /// The dynamic loader's error.
        loader: String,
    },
    /// The driver loaded but reports no GPU.
    #[error("the CUDA driver sees no GPU: {0}")]
    NoDevice(String),
    /// A CUDA call failed.
    #[error("{step} failed{}: {error}", device_suffix(*.device))]
    Cuda {
        /// What the workload was doing.
        step: &'static str,
        /// The device, when the step was on one.
        device: Option<usize>,
        /// The driver's error (name and description).
        error: String,
    },
    /// The kernel ran but its result is wrong.
    #[error(
        "result verification failed on device {device} at element {index}: expected {expected}, got {got}"
    )]
    WrongResult {
        /// The device.
        device: usize,
        /// The first wrong element.
        index: usize,
        /// A + B.
        expected: f32,
        /// What the kernel wrote.
        got: f32,
    },
    /// The driver API binding gave up, typically on an entry point the loaded library lacks.
    #[error(
        "the CUDA driver library cannot serve this workload (a driver older than CUDA 12?): {0}"
    )]
    DriverTooOld(String),
}

fn device_suffix(device: Option<usize>) -> String {
    device.map_or_else(String::new, |d| format!(" on device {d}"))
}

impl Failure {
    /// The process exit code for this failure.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::WrongResult { .. } => EXIT_WRONG_RESULT,
            Self::NoLibrary { .. } => EXIT_NO_LIBRARY,
            Self::NoDevice(_) => EXIT_NO_DEVICE,
            Self::Cuda { .. } => EXIT_CUDA_ERROR,
            Self::DriverTooOld(_) => EXIT_DRIVER_TOO_OLD,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cause_has_its_own_exit_code() {
        let all = [
            Failure::NoLibrary {
                library: "libcuda.so.1",
                loader: "x".into(),
            },
            Failure::NoDevice("x".into()),
            Failure::Cuda {
                step: "x",
                device: None,
                error: "x".into(),
            },
            Failure::WrongResult {
                device: 0,
                index: 0,
                expected: 1.0,
                got: 0.0,
            },
            Failure::DriverTooOld("x".into()),
        ];
        let mut codes: Vec<u8> = all.iter().map(Failure::exit_code).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), all.len());
        assert!(!codes.contains(&0));
    }

    #[test]
    fn a_cuda_error_names_the_step_and_the_device() {
        let failure = Failure::Cuda {
            step: "JIT-loading the vector-add kernel",
            device: Some(3),
            error: "CUDA_ERROR_INVALID_PTX".into(),
        };
        assert_eq!(
            failure.to_string(),
            "JIT-loading the vector-add kernel failed on device 3: CUDA_ERROR_INVALID_PTX"
        );
    }
}
