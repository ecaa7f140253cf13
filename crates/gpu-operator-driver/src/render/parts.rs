//! Small builders of pod parts the driver's containers share beyond core's
//! (`gpu_operator_core::build::pod`): mount variants, the privileged security context with the
//! SELinux level kernel modules need, and exec probes.

use gpu_operator_core::build::pod;
use k8s_openapi::api::core::v1::{ExecAction, Probe, SELinuxOptions, SecurityContext, VolumeMount};

/// A read-only mount.
pub fn read_only(mut mount: VolumeMount) -> VolumeMount {
    mount.read_only = Some(true);
    mount
}

pub use gpu_operator_core::build::pod::propagated;

/// Privileged, with the SELinux level driver containers need to load kernel modules.
pub fn privileged() -> SecurityContext {
    SecurityContext {
        se_linux_options: Some(SELinuxOptions {
            level: Some("s0".to_owned()),
            ..SELinuxOptions::default()
        }),
        ..pod::privileged()
    }
}

/// Probe timings: initial delay, period, timeout, success and failure thresholds.
pub type Timings = (i32, i32, i32, i32, i32);

/// An exec probe running `command` with `timings`.
pub fn exec_probe(command: &[&str], timings: Timings) -> Probe {
    let (initial_delay, period, timeout, success, failure) = timings;
    Probe {
        exec: Some(ExecAction {
            command: Some(command.iter().map(|c| (*c).to_owned()).collect()),
        }),
        initial_delay_seconds: Some(initial_delay),
        period_seconds: Some(period),
        timeout_seconds: Some(timeout),
        success_threshold: Some(success),
        failure_threshold: Some(failure),
        ..Probe::default()
    }
}
