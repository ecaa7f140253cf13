//! The driver library: loading `libcuda.so.1` with the dynamic loader's own error when it is
//! missing, checking it has every entry point the workload calls (the binding would panic on a
//! missing one, and abort when the panic reaches a destructor), counting devices, and a guard that
//! turns any other panic of the binding into a [`Failure`].
#![allow(unsafe_code)]

use std::panic::{self, AssertUnwindSafe};

use cudarc::driver::{CudaContext, sys::CUresult};

use crate::Failure;

/// The driver library's soname, as the NVIDIA container runtime mounts it.
pub const LIBRARY: &str = "libcuda.so.1";

/// The driver API entry points the workload calls (through the binding), in the order it first
/// calls them; the binding allocates with `cuMemAllocAsync`/`cuMemFreeAsync` on a GPU with memory
/// pools and `cuMemAlloc_v2`/`cuMemFree_v2` on one without.
pub const ENTRY_POINTS: [&str; 24] = [
    "cuInit",
    "cuGetErrorString",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDevicePrimaryCtxRetain",
    "cuDeviceGetAttribute",
    "cuCtxGetCurrent",
    "cuCtxSetCurrent",
    "cuDeviceGetName",
    "cuModuleLoadData",
    "cuModuleGetFunction",
    "cuMemAlloc_v2",
    "cuMemAllocAsync",
    "cuEventCreate",
    "cuMemcpyHtoDAsync_v2",
    "cuMemsetD8Async",
    "cuLaunchKernel",
    "cuStreamSynchronize",
    "cuMemcpyDtoHAsync_v2",
    "cuMemFree_v2",
    "cuMemFreeAsync",
    "cuEventDestroy_v2",
    "cuModuleUnload",
    "cuDevicePrimaryCtxRelease_v2",
];

/// The loaded library, kept open while the workload runs.
pub struct Loaded(
    #[allow(dead_code, reason = "held to keep the library mapped")] libloading::Library,
);

/// Loads the driver library through the dynamic loader's search path and checks its entry points.
pub fn open() -> Result<Loaded, Failure> {
    // SAFETY: loading runs the library's initialisers; libcuda.so.1 is the NVIDIA driver library
    // this program exists to exercise, and the binding loads the same library next.
    let library = unsafe { libloading::Library::new(LIBRARY) }.map_err(|e| Failure::NoLibrary {
        library: LIBRARY,
        // libloading's own text is generic ("dlopen failed"); the loader's is in the source.
        loader: std::error::Error::source(&e).map_or_else(|| e.to_string(), ToString::to_string),
    })?;
    let missing: Vec<&str> = ENTRY_POINTS
        .into_iter()
        // SAFETY: the symbol is only looked up, never called or read through.
        .filter(|name| unsafe { library.get::<*const ()>(name.as_bytes()) }.is_err())
        .collect();
    if missing.is_empty() {
        Ok(Loaded(library))
    } else {
        Err(Failure::DriverTooOld(format!(
            "{LIBRARY} lacks {}",
            missing.join(", ")
        )))
    }
}

/// The number of devices the driver sees; none is a failure.
pub fn device_count() -> Result<usize, Failure> {
    match CudaContext::device_count() {
        Ok(n) if n > 0 => Ok(usize::try_from(n).unwrap_or(0)),
        Ok(n) => Err(Failure::NoDevice(format!("the driver reports {n} devices"))),
        Err(e) if e.0 == CUresult::CUDA_ERROR_NO_DEVICE => Err(Failure::NoDevice(e.to_string())),
        Err(e) => Err(Failure::Cuda {
            step: "initializing the CUDA driver (cuInit)",
            device: None,
            error: e.to_string(),
        }),
    }
}

/// Runs `f`, turning a panic inside it into [`Failure::DriverTooOld`] with the panic's message;
/// the default panic report is silenced meanwhile (the failure is reported once, by the caller).
pub fn guarded<T>(f: impl FnOnce() -> T) -> Result<T, Failure> {
    let previous = panic::take_hook();
    panic::set_hook(Box::new(|_| {}));
    let result = panic::catch_unwind(AssertUnwindSafe(f));
    panic::set_hook(previous);
    result.map_err(|payload| {
        let message = payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| "the driver API binding panicked".to_owned());
        Failure::DriverTooOld(message)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_inside_the_guard_becomes_a_failure_with_its_message() {
        let failed = guarded(|| -> u8 { std::panic::panic_any("Missing symbol cuFoo".to_owned()) })
            .unwrap_err();
        assert_eq!(failed, Failure::DriverTooOld("Missing symbol cuFoo".into()));
        assert_eq!(guarded(|| 7).unwrap(), 7);
    }
}
