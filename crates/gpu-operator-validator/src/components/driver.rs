//! The driver check: a host-installed driver first, else a driver container's root (when the
//! operator deploys the driver container, only once it has finished, with the extra modules it
//! flags loaded); the kernel module must be loaded; NVML (loaded at run time) answers, with `nvidia-smi` as fallback; the
//! versions must agree and at least one GPU must show up.

use std::path::{Path, PathBuf};

use gpu_operator_api::validator::reason;
use tracing::{info, warn};

use super::{Failed, Outcome, Passed, driver_container};
use crate::{
    config::Config,
    host::{self, NVIDIA_SMI_PATHS, NVML_LIBRARY},
    nvml::{GpuInfo, Nvml, NvmlError, Source},
    smi::{self, SmiError},
    status_files::DriverInfo,
};

/// Where the driver was found.
struct Located {
    /// Root in this container (the host mount or the driver install dir).
    root: PathBuf,
    smi: host::NvidiaSmi,
    info: DriverInfo,
    kind: &'static str,
    /// Extra kernel modules the driver container says it loaded.
    extra_modules: Vec<&'static str>,
}

fn locate(cfg: &Config) -> Result<Located, Failed> {
    if let Some(smi) = host::find_nvidia_smi(&cfg.host_root_ctr_path) {
        return Ok(Located {
            root: cfg.host_root_ctr_path.clone(),
            smi,
            info: DriverInfo::host(&cfg.host_root),
            kind: "host driver",
            extra_modules: Vec::new(),
        });
    }
    let extra_modules = if cfg.driver_managed {
        driver_container::finished(&cfg.output_dir)?
    } else {
        Vec::new()
    };
    let ctr = &cfg.driver_install_dir_ctr_path;
    if let Some(smi) = host::find_nvidia_smi(ctr) {
        return Ok(Located {
            root: ctr.clone(),
            smi,
            info: DriverInfo::container(
                &cfg.host_root,
                &cfg.driver_install_dir,
                host::has_own_devices(ctr),
            ),
            kind: "driver container",
            extra_modules,
        });
    }
    Err(Failed::new(
        reason::DRIVER_NOT_FOUND,
        format!(
            "no NVIDIA driver: no executable nvidia-smi under the host root {} nor under the driver install dir {} (looked in {})",
            cfg.host_root_ctr_path.display(),
            ctr.display(),
            NVIDIA_SMI_PATHS.join(", ")
        ),
    ))
}

fn smi_failure(error: &SmiError, nvml: Option<&NvmlError>) -> Failed {
    let message = match nvml {
        Some(nvml) => format!("{nvml}; fallback {error}"),
        None => error.to_string(),
    };
    let reason = match error {
        SmiError::Timeout { .. } => reason::NVIDIA_SMI_TIMEOUT,
        SmiError::NoDevices { .. } => reason::NO_GPU,
        SmiError::VersionMismatch { .. } => reason::DRIVER_VERSION_MISMATCH,
        _ => reason::DRIVER_QUERY_FAILED,
    };
    Failed::new(reason, message)
}

/// Asks NVML, then `nvidia-smi -q`; with `skip_gpu_init` only `nvidia-smi --version`.
fn query(cfg: &Config, nvml: &dyn Nvml, located: &Located) -> Result<(GpuInfo, Source), Failed> {
    let library = host::find_nvml(&located.root);
    let program = &located.smi.path;
    if cfg.skip_gpu_init {
        let out = smi::run(program, &["--version"], library.as_deref(), cfg.smi_timeout)
            .map_err(|e| smi_failure(&e, None))?;
        let info = smi::parse_version(program, &out).map_err(|e| smi_failure(&e, None))?;
        return Ok((info, Source::NvidiaSmi));
    }
    // Inside the root when it has the library; for a root of `/`, the loader's search path.
    let candidate = library
        .clone()
        .or_else(|| (located.root == Path::new("/")).then(|| PathBuf::from(NVML_LIBRARY)));
    let nvml_error = match candidate {
        Some(lib) => match nvml.query(&lib) {
            Ok(info) => return Ok((info, Source::Nvml)),
            Err(NvmlError::VersionMismatch) => {
                return Err(Failed::new(
                    reason::DRIVER_VERSION_MISMATCH,
                    format!("{} (library {})", NvmlError::VersionMismatch, lib.display()),
                ));
            }
            Err(e) => e,
        },
        None => NvmlError::Load {
            library: format!("{NVML_LIBRARY} under {}", located.root.display()),
            message: "not found".to_owned(),
        },
    };
    warn!(error = %nvml_error, "NVML unavailable, falling back to nvidia-smi");
    let out = smi::run(program, &["-q"], library.as_deref(), cfg.smi_timeout)
        .map_err(|e| smi_failure(&e, Some(&nvml_error)))?;
    let info = smi::parse_query(program, &out).map_err(|e| smi_failure(&e, Some(&nvml_error)))?;
    Ok((info, Source::NvidiaSmi))
}

/// Runs the driver check.
pub fn check(cfg: &Config, nvml: &dyn Nvml) -> Outcome {
    let located = locate(cfg)?;
    info!(nvidia_smi = %located.smi.path.display(), kind = located.kind, "found a driver");
    let module = if located.smi.wsl {
        None
    } else {
        let version_file = cfg.host_root_ctr_path.join(host::MODULE_VERSION_FILE);
        match host::kernel_module_version(&cfg.host_root_ctr_path) {
            Ok(Some(version)) => Some(version),
            Ok(None) => {
                return Err(Failed::new(
                    reason::DRIVER_NOT_LOADED,
                    format!(
                        "the NVIDIA kernel module is not loaded: {} does not exist ({} at {})",
                        version_file.display(),
                        located.kind,
                        located.smi.path.display()
                    ),
                ));
            }
            Err(e) => {
                return Err(Failed::new(
                    reason::DRIVER_QUERY_FAILED,
                    format!("reading {}: {e}", version_file.display()),
                ));
            }
        }
    };
    driver_container::require_modules(&cfg.host_root_ctr_path, &located.extra_modules)?;
    let (info, source) = query(cfg, nvml, &located)?;
    if let Some(module) = module.filter(|m| !m.is_empty() && *m != info.driver_version) {
        return Err(Failed::new(
            reason::DRIVER_VERSION_MISMATCH,
            format!(
                "the loaded kernel module is {module} but the user-space driver is {} ({source}); reboot or reload the module",
                info.driver_version
            ),
        ));
    }
    if info.gpus.as_ref().is_some_and(Vec::is_empty) {
        return Err(Failed::new(
            reason::NO_GPU,
            format!(
                "driver {} is loaded but {source} sees no GPU",
                info.driver_version
            ),
        ));
    }
    Ok(Passed {
        reason: reason::DRIVER_VALIDATED,
        message: format!(
            "{} ({} at {}, via {source})",
            info.summary(),
            located.kind,
            located.info.driver_root.display()
        ),
        status_file: located.info.render(),
        file: super::FileToWrite::ComponentFile,
    })
}

#[cfg(test)]
mod tests;
