//! The toolkit check, as NVIDIA's: the validator container runs with the nvidia runtime class,
//! so the runtime (or CDI) must have injected a working `nvidia-smi` that sees the GPUs.

use gpu_operator_api::validator::reason;

use super::{Failed, Outcome, passed};
use crate::{
    config::Config,
    host,
    smi::{self, SmiError},
};

/// Runs the toolkit check.
pub fn check(cfg: &Config) -> Outcome {
    let Some(program) = host::find_on_path(cfg.search_path.as_deref()) else {
        return Err(Failed::new(
            reason::NVIDIA_SMI_NOT_INJECTED,
            format!(
                "nvidia-smi is not on PATH ({}) in the validator container: the container runtime did not inject the driver; check the toolkit DaemonSet and that the pod runs with the nvidia runtime class or CDI",
                cfg.search_path
                    .as_deref()
                    .map_or_else(String::new, |p| p.to_string_lossy().into_owned())
            ),
        ));
    };
    let failure = |e: &SmiError| {
        let reason = match e {
            SmiError::Timeout { .. } => reason::NVIDIA_SMI_TIMEOUT,
            SmiError::NoDevices { .. } => reason::NO_GPU,
            _ => reason::NVIDIA_SMI_FAILED,
        };
        Failed::new(reason, format!("injected {e}"))
    };
    let out = smi::run(&program, &["-q"], None, cfg.smi_timeout).map_err(|e| failure(&e))?;
    let info = smi::parse_query(&program, &out).map_err(|e| failure(&e))?;
    if info.gpus.as_ref().is_some_and(Vec::is_empty) {
        return Err(Failed::new(
            reason::NO_GPU,
            format!("the injected {} sees no GPU", program.display()),
        ));
    }
    passed(
        reason::TOOLKIT_VALIDATED,
        format!(
            "containers get GPUs: the injected nvidia-smi works ({})",
            info.summary()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Fixture;

    #[test]
    fn an_injected_nvidia_smi_that_sees_gpus_passes() {
        let f = Fixture::new("toolkit");
        f.inject_smi("570.172.08", 8);
        let passed = check(&f.config()).unwrap();
        assert_eq!(passed.reason, reason::TOOLKIT_VALIDATED);
        assert!(passed.message.contains("8 GPUs"), "{}", passed.message);
        assert!(passed.status_file.is_empty());
    }

    #[test]
    fn nothing_injected_is_reported() {
        let f = Fixture::new("toolkit");
        let failed = check(&f.config()).unwrap_err();
        assert_eq!(failed.reason, reason::NVIDIA_SMI_NOT_INJECTED);
        assert!(failed.message.contains("runtime class"));
    }

    #[test]
    fn a_failing_or_blind_nvidia_smi_fails_the_check() {
        let f = Fixture::new("toolkit");
        f.inject_smi("570.172.08", 0);
        assert_eq!(check(&f.config()).unwrap_err().reason, reason::NO_GPU);
        crate::smi::tests::script(
            &f.dir.path().join("ctr-bin/nvidia-smi"),
            "echo 'Failed to initialize NVML: Unknown Error' >&2; exit 255",
        );
        let failed = check(&f.config()).unwrap_err();
        assert_eq!(failed.reason, reason::NVIDIA_SMI_FAILED);
        assert!(
            failed.message.contains("Unknown Error"),
            "{}",
            failed.message
        );
    }
}
