//! The `vfio-pci` check (`vm-passthrough` nodes), as NVIDIA's validator has it: every NVIDIA GPU
//! of the host is bound to a VFIO driver, so whole GPUs can be passed to virtual machines. NVIDIA
//! accepts `vfio-pci` and `nvgrace_gpu_vfio_pci` (the VFIO variant driver of Grace Hopper and
//! Grace Blackwell GPUs); unlike NVIDIA's, a host without any NVIDIA GPU fails.

use std::path::Path;

use gpu_operator_api::validator::reason;

use super::{
    Failed, Outcome, passed,
    sysfs_pci::{self, PCI_DEVICES, PciGpu},
};

/// The drivers a passed-through GPU may be bound to.
pub const VFIO_DRIVERS: [&str; 2] = ["vfio-pci", "nvgrace_gpu_vfio_pci"];

fn is_vfio(gpu: &PciGpu) -> bool {
    gpu.driver
        .as_deref()
        .is_some_and(|d| VFIO_DRIVERS.contains(&d))
}

fn describe_binding(gpu: &PciGpu) -> String {
    match &gpu.driver {
        Some(driver) => format!("{} (bound to {driver})", gpu.address),
        None => format!("{} (bound to no driver)", gpu.address),
    }
}

/// Runs the check on the sysfs tree at `sysfs`.
pub fn check(sysfs: &Path) -> Outcome {
    let gpus = sysfs_pci::nvidia_gpus(sysfs)
        .map_err(|e| Failed::new(reason::SYSFS_UNREADABLE, e.to_string()))?;
    if gpus.is_empty() {
        return Err(Failed::new(
            reason::NO_GPU_DEVICE,
            format!(
                "no NVIDIA GPU under {} (PCI vendor 0x10de, class 0x0300xx or 0x0302xx): nothing to pass through to virtual machines; check that the node has NVIDIA GPUs and that SYSFS_ROOT (or the host root mount) shows the host's sysfs",
                sysfs.join(PCI_DEVICES).display()
            ),
        ));
    }
    let unbound: Vec<String> = gpus
        .iter()
        .filter(|g| !is_vfio(g))
        .map(describe_binding)
        .collect();
    if !unbound.is_empty() {
        return Err(Failed::new(
            reason::GPU_NOT_BOUND_TO_VFIO,
            format!(
                "NVIDIA GPUs not bound to vfio-pci ({} of {}): {}; the VFIO manager (DaemonSet nvidia-vfio-manager, sandboxWorkloads with vfioManager enabled) binds them: check its pod on this node",
                unbound.len(),
                gpus.len(),
                unbound.join(", ")
            ),
        ));
    }
    let bound: Vec<String> = gpus
        .iter()
        .map(|g| match g.driver.as_deref() {
            Some("vfio-pci") | None => g.address.clone(),
            Some(other) => format!("{} ({other})", g.address),
        })
        .collect();
    passed(
        reason::VFIO_PCI_VALIDATED,
        format!(
            "every NVIDIA GPU is bound to vfio-pci ({}): {}",
            gpus.len(),
            bound.join(", ")
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::components::{
        FileToWrite,
        fake_sysfs::{FakeSysfs, Gpu},
    };

    #[test]
    fn passes_when_every_gpu_is_bound_to_a_vfio_driver() {
        let sys = FakeSysfs::new();
        sys.gpu(&Gpu::new("0000:3b:00.0").driver("vfio-pci"));
        sys.gpu(&Gpu::new("0009:01:00.0").driver("nvgrace_gpu_vfio_pci"));
        sys.device("0000:3b:00.1", "0x10de", "0x040300"); // audio function, left to the host
        let passed = check(sys.root()).unwrap();
        assert_eq!(passed.reason, "VfioPciValidated");
        assert_eq!(
            passed.message,
            "every NVIDIA GPU is bound to vfio-pci (2): 0000:3b:00.0, 0009:01:00.0 (nvgrace_gpu_vfio_pci)"
        );
        assert_eq!(passed.file, FileToWrite::ComponentFile);
        assert!(passed.status_file.is_empty());
    }

    #[test]
    fn names_each_gpu_bound_to_nvidia_or_to_nothing() {
        let sys = FakeSysfs::new();
        sys.gpu(&Gpu::new("0000:3b:00.0").driver("vfio-pci"));
        sys.gpu(&Gpu::new("0000:5e:00.0").driver("nvidia"));
        sys.gpu(&Gpu::new("0000:86:00.0"));
        let failed = check(sys.root()).unwrap_err();
        assert_eq!(failed.reason, "GPUNotBoundToVfio");
        assert!(!failed.permanent);
        assert_eq!(
            failed.message,
            "NVIDIA GPUs not bound to vfio-pci (2 of 3): 0000:5e:00.0 (bound to nvidia), 0000:86:00.0 (bound to no driver); the VFIO manager (DaemonSet nvidia-vfio-manager, sandboxWorkloads with vfioManager enabled) binds them: check its pod on this node"
        );
        // Once the VFIO manager rebinds them, the same tree passes.
        sys.bind("0000:5e:00.0", Some("vfio-pci"));
        sys.bind("0000:86:00.0", Some("vfio-pci"));
        assert_eq!(check(sys.root()).unwrap().reason, "VfioPciValidated");
    }

    #[test]
    fn a_host_without_nvidia_gpus_fails() {
        let sys = FakeSysfs::new();
        sys.device("0000:00:1f.6", "0x8086", "0x020000");
        sys.device("0000:3b:00.1", "0x10de", "0x040300");
        let failed = check(sys.root()).unwrap_err();
        assert_eq!(failed.reason, "NoGPUDevice");
        assert_eq!(
            failed.message,
            format!(
                "no NVIDIA GPU under {}/bus/pci/devices (PCI vendor 0x10de, class 0x0300xx or 0x0302xx): nothing to pass through to virtual machines; check that the node has NVIDIA GPUs and that SYSFS_ROOT (or the host root mount) shows the host's sysfs",
                sys.root().display()
            )
        );
    }

    #[test]
    fn an_unreadable_sysfs_names_the_path() {
        let missing = tempfile::tempdir().unwrap();
        let failed = check(missing.path()).unwrap_err();
        assert_eq!(failed.reason, "SysfsUnreadable");
        assert!(
            failed.message.starts_with(&format!(
                "reading {}/bus/pci/devices: ",
                missing.path().display()
            )),
            "{}",
            failed.message
        );
    }
}
