//! Querying the driver through NVML, loaded at run time: the [`Nvml`] trait (faked in tests), its
//! `nvml-wrapper` implementation, and [`GpuInfo`], what a driver query yields (also from `nvidia-smi`).

use std::{collections::BTreeMap, fmt, fmt::Write as _, path::Path};

use nvml_wrapper::error::NvmlError as WrapperError;

/// What a driver query found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GpuInfo {
    /// The user-space driver's version, e.g. `570.172.08`.
    pub driver_version: String,
    /// The CUDA version the driver supports, e.g. `12.8`.
    pub cuda_version: Option<String>,
    /// Product name of each GPU; `None` when the query skipped GPU initialization.
    pub gpus: Option<Vec<String>>,
}

impl GpuInfo {
    /// A one-line summary: `driver 570.172.08, CUDA 12.8, 8 GPUs (8x NVIDIA H100 80GB HBM3)`.
    pub fn summary(&self) -> String {
        let mut out = format!("driver {}", self.driver_version);
        if let Some(cuda) = &self.cuda_version {
            let _ = write!(out, ", CUDA {cuda}");
        }
        match &self.gpus {
            None => out.push_str(", GPUs not initialized (DRIVER_VALIDATION_SKIP_GPU_INIT)"),
            Some(gpus) => {
                let mut products = BTreeMap::<&str, usize>::new();
                for gpu in gpus {
                    *products.entry(gpu.as_str()).or_default() += 1;
                }
                let products: Vec<String> = products
                    .iter()
                    .map(|(name, n)| format!("{n}x {name}"))
                    .collect();
                let plural = if gpus.len() == 1 { "" } else { "s" };
                let _ = write!(out, ", {} GPU{plural}", gpus.len());
                if !products.is_empty() {
                    let _ = write!(out, " ({})", products.join(", "));
                }
            }
        }
        out
    }
}

/// Why NVML could not answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NvmlError {
    /// The library could not be loaded (absent, wrong architecture, missing symbols).
    #[error("cannot load {library}: {message}")]
    Load {
        /// The library's path or soname.
        library: String,
        /// The loader's error.
        message: String,
    },
    /// NVML loaded but the kernel driver is not.
    #[error("NVML: the NVIDIA kernel driver is not loaded")]
    DriverNotLoaded,
    /// NVML and the kernel module have different versions.
    #[error("NVML: driver/library version mismatch")]
    VersionMismatch,
    /// Another NVML failure.
    #[error("NVML: {what} failed: {message}")]
    Query {
        /// The call that failed.
        what: &'static str,
        /// NVML's error.
        message: String,
    },
}

/// A way to query the driver through NVML.
pub trait Nvml: Send + Sync {
    /// Loads NVML from `library` (a path, or the soname for the loader's search path) and queries
    /// the driver version, the CUDA driver version and every GPU's name.
    fn query(&self, library: &Path) -> Result<GpuInfo, NvmlError>;
}

/// NVML through `nvml-wrapper`, which dlopens the library: the binary has no link-time
/// dependency on NVIDIA's libraries.
#[derive(Debug, Default, Clone, Copy)]
pub struct NvmlLibrary;

fn query_error(what: &'static str) -> impl Fn(WrapperError) -> NvmlError {
    move |e| match e {
        WrapperError::DriverNotLoaded => NvmlError::DriverNotLoaded,
        WrapperError::LibRmVersionMismatch => NvmlError::VersionMismatch,
        other => NvmlError::Query {
            what,
            message: other.to_string(),
        },
    }
}

impl Nvml for NvmlLibrary {
    fn query(&self, library: &Path) -> Result<GpuInfo, NvmlError> {
        let nvml = nvml_wrapper::Nvml::builder()
            .lib_path(library.as_os_str())
            .init()
            .map_err(|e| match e {
                WrapperError::LibloadingError(_) | WrapperError::FailedToLoadSymbol(_) => {
                    NvmlError::Load {
                        library: library.display().to_string(),
                        message: e.to_string(),
                    }
                }
                other => query_error("nvmlInit")(other),
            })?;
        let driver_version = nvml
            .sys_driver_version()
            .map_err(query_error("nvmlSystemGetDriverVersion"))?;
        let cuda_version = nvml.sys_cuda_driver_version().ok().map(|v| {
            let major = nvml_wrapper::cuda_driver_version_major(v);
            let minor = nvml_wrapper::cuda_driver_version_minor(v);
            format!("{major}.{minor}")
        });
        let count = nvml
            .device_count()
            .map_err(query_error("nvmlDeviceGetCount"))?;
        let gpus = (0..count)
            .map(|i| {
                let device = nvml
                    .device_by_index(i)
                    .map_err(query_error("nvmlDeviceGetHandleByIndex"))?;
                device.name().map_err(query_error("nvmlDeviceGetName"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(GpuInfo {
            driver_version,
            cuda_version,
            gpus: Some(gpus),
        })
    }
}

/// Where a [`GpuInfo`] came from, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// NVML.
    Nvml,
    /// `nvidia-smi`.
    NvidiaSmi,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Nvml => "NVML",
            Self::NvidiaSmi => "nvidia-smi",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_names_version_count_and_products() {
        let info = GpuInfo {
            driver_version: "570.172.08".into(),
            cuda_version: Some("12.8".into()),
            gpus: Some(vec!["NVIDIA H100 80GB HBM3".into(); 8]),
        };
        assert_eq!(
            info.summary(),
            "driver 570.172.08, CUDA 12.8, 8 GPUs (8x NVIDIA H100 80GB HBM3)"
        );
        let one = GpuInfo {
            driver_version: "535.261.03".into(),
            cuda_version: None,
            gpus: Some(vec!["Tesla T4".into()]),
        };
        assert_eq!(one.summary(), "driver 535.261.03, 1 GPU (1x Tesla T4)");
        let none = GpuInfo { gpus: None, ..one };
        assert!(none.summary().contains("not initialized"));
    }

    #[test]
    fn a_missing_library_is_a_load_error_not_a_panic() {
        let err = NvmlLibrary
            .query(Path::new("/nonexistent/libnvidia-ml.so.1"))
            .unwrap_err();
        assert!(matches!(err, NvmlError::Load { .. }), "{err:?}");
        assert!(err.to_string().contains("/nonexistent/libnvidia-ml.so.1"));
    }

    #[test]
    fn a_file_that_is_not_a_library_is_a_load_error() {
        let dir = tempfile::tempdir().unwrap();
        let lib = dir.path().join("libnvidia-ml.so.1");
        std::fs::write(&lib, "not an ELF file").unwrap();
        assert!(matches!(
            NvmlLibrary.query(&lib),
            Err(NvmlError::Load { .. })
        ));
    }
}
