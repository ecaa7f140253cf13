//! The `vgpu-manager` check (`vm-vgpu` nodes), as NVIDIA's validator has it: the vGPU host driver
//! works — its `nvidia-smi` (the host's when the driver is pre-installed there, else the vGPU
//! manager container's under the driver install dir) answers — and it has registered its parent
//! devices: when a GPU has SR-IOV virtual functions enabled, every SR-IOV GPU has all of them on;
//! otherwise some NVIDIA GPU is an mdev parent under `class/mdev_bus`. A host driver leaves
//! `host-vgpu-manager-ready`, the container's `vgpu-manager-ready` (NVIDIA's names).

use std::path::Path;

use gpu_operator_api::validator::{reason, status_file};

use super::{
    Failed, FileToWrite, Outcome, Passed,
    sysfs_pci::{self, PciGpu, SysfsError},
};
use crate::{
    config::Config,
    host::{self, NVIDIA_SMI_PATHS},
    smi::{self, SmiError},
};

/// The mdev parents, relative to the sysfs root.
pub const MDEV_PARENTS: &str = "class/mdev_bus";

/// Where the vGPU host driver was found.
struct Located {
    smi: host::NvidiaSmi,
    root: std::path::PathBuf,
    on_host: bool,
}

fn locate(cfg: &Config) -> Result<Located, Failed> {
    let roots = [
        (&cfg.host_root_ctr_path, true),
        (&cfg.driver_install_dir_ctr_path, false),
    ];
    roots
        .into_iter()
        .find_map(|(root, on_host)| {
            host::find_nvidia_smi(root).map(|smi| Located {
                smi,
                root: root.clone(),
                on_host,
            })
        })
        .ok_or_else(|| {
            Failed::new(
                reason::VGPU_MANAGER_NOT_FOUND,
                format!(
                    "no vGPU host driver: no executable nvidia-smi under the host root {} nor under the driver install dir {} (looked in {}); the vGPU manager (DaemonSet nvidia-vgpu-manager-daemonset) installs it: check its pod on this node, or install NVIDIA's vGPU host driver on the host",
                    cfg.host_root_ctr_path.display(),
                    cfg.driver_install_dir_ctr_path.display(),
                    NVIDIA_SMI_PATHS.join(", ")
                ),
            )
        })
}

/// Runs the driver's `nvidia-smi -q` and returns its one-line summary.
fn query(cfg: &Config, located: &Located) -> Result<String, Failed> {
    let program = &located.smi.path;
    let library = host::find_nvml(&located.root);
    let failure = |e: &SmiError| {
        let reason = match e {
            SmiError::Timeout { .. } => reason::NVIDIA_SMI_TIMEOUT,
            _ => reason::VGPU_MANAGER_FAILED,
        };
        Failed::new(reason, format!("the vGPU host driver does not answer: {e}"))
    };
    let out =
        smi::run(program, &["-q"], library.as_deref(), cfg.smi_timeout).map_err(|e| failure(&e))?;
    Ok(smi::parse_query(program, &out).map_or_else(
        |_| format!("{} answers", program.display()),
        |info| info.summary(),
    ))
}

/// `<address> has <enabled> of <total> virtual functions` for each SR-IOV GPU short of some.
fn missing_virtual_functions(gpus: &[PciGpu]) -> Vec<String> {
    gpus.iter()
        .filter_map(|g| {
            let sriov = g.sriov?;
            (sriov.enabled_vfs < sriov.total_vfs).then(|| {
                format!(
                    "{} has {} of {} virtual functions",
                    g.address, sriov.enabled_vfs, sriov.total_vfs
                )
            })
        })
        .collect()
}

/// The NVIDIA GPUs registered as mdev parents.
fn mdev_parents(sysfs: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(sysfs.join(MDEV_PARENTS)) else {
        return Vec::new();
    };
    let mut parents: Vec<String> = entries
        .flatten()
        .filter(|e| sysfs_pci::is_nvidia_gpu(&e.path()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    parents.sort();
    parents
}

/// NVIDIA's readiness of the parent devices vGPUs are created on.
pub fn parent_devices(sysfs: &Path) -> Result<String, Failed> {
    let gpus = sysfs_pci::nvidia_gpus(sysfs)
        .map_err(|e: SysfsError| Failed::new(reason::SYSFS_UNREADABLE, e.to_string()))?;
    let sriov_on = gpus
        .iter()
        .any(|g| g.sriov.is_some_and(|s| s.enabled_vfs > 0));
    if sriov_on {
        let missing = missing_virtual_functions(&gpus);
        if !missing.is_empty() {
            return Err(Failed::new(
                reason::VGPU_PARENT_DEVICES_NOT_READY,
                format!(
                    "not every SR-IOV virtual function is enabled yet: {}; the vGPU manager enables them (sriov-manage -e ALL) after loading the driver: check its pod on this node",
                    missing.join(", ")
                ),
            ));
        }
        let enabled: u64 = gpus
            .iter()
            .filter_map(|g| g.sriov)
            .map(|s| s.enabled_vfs)
            .sum();
        let pfs = gpus.iter().filter(|g| g.sriov.is_some()).count();
        return Ok(format!(
            "all {enabled} SR-IOV virtual functions of {pfs} GPUs enabled"
        ));
    }
    let parents = mdev_parents(sysfs);
    if parents.is_empty() {
        return Err(Failed::new(
            reason::VGPU_PARENT_DEVICES_NOT_READY,
            format!(
                "the vGPU host driver has registered no parent device: no NVIDIA GPU under {} and no GPU with SR-IOV virtual functions enabled; check the vGPU manager's pod on this node and that the GPUs support vGPU",
                sysfs.join(MDEV_PARENTS).display()
            ),
        ));
    }
    Ok(format!("mdev parent devices: {}", parents.join(", ")))
}

/// Runs the check: the driver under the configured roots, the parent devices under `sysfs`.
pub fn check(cfg: &Config, sysfs: &Path) -> Outcome {
    let located = locate(cfg)?;
    let driver = query(cfg, &located)?;
    let parents = parent_devices(sysfs)?;
    let (kind, file) = if located.on_host {
        (
            "host driver",
            FileToWrite::Other(status_file::HOST_VGPU_MANAGER),
        )
    } else {
        ("vGPU manager container", FileToWrite::ComponentFile)
    };
    Ok(Passed {
        reason: reason::VGPU_MANAGER_VALIDATED,
        message: format!(
            "vGPU host driver works: {driver} ({kind} at {}); {parents}",
            located.smi.path.display()
        ),
        status_file: String::new(),
        file,
    })
}

#[cfg(test)]
mod tests;
