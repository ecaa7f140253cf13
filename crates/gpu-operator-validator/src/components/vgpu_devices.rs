//! The `vgpu-devices` check (`vm-vgpu` nodes): vGPU devices exist on the host. NVIDIA's validator
//! counts the mediated devices under `bus/mdev/devices` whose parent is an NVIDIA GPU (its
//! go-nvlib `nvmdev.GetAllDevices`). The vGPU host driver of vGPU 17 and later uses NVIDIA's
//! vendor-specific VFIO framework instead on Ada, Hopper and newer GPUs: there a vGPU is a virtual
//! function whose `nvidia/current_vgpu_type` is not `0` (how NVIDIA's `vgpu-device-manager`
//! creates and lists them), and this check counts those too.

use std::{fmt::Write as _, fs, path::Path};

use gpu_operator_api::validator::reason;

use super::{
    Failed, Outcome, passed,
    sysfs_pci::{self, SysfsError},
};

/// The mediated devices, relative to the sysfs root.
pub const MDEV_DEVICES: &str = "bus/mdev/devices";
/// A virtual function's vGPU type under NVIDIA's vendor-specific VFIO framework.
pub const CURRENT_VGPU_TYPE: &str = "nvidia/current_vgpu_type";
/// Devices named in a message before the rest is counted.
const LISTED: usize = 8;

/// NVIDIA's mdev type name without its product prefix: `A100-4C` from `NVIDIA A100-4C` (the last
/// word, as NVIDIA's go-nvlib reads it).
fn type_name(raw: &str) -> Option<&str> {
    raw.split_whitespace().last()
}

/// `<uuid> (<type>) on <parent>` for each NVIDIA mediated device.
fn mediated_devices(sysfs: &Path) -> Result<Vec<String>, SysfsError> {
    let bus = sysfs.join(MDEV_DEVICES);
    let entries = match fs::read_dir(&bus) {
        Ok(entries) => entries,
        // No mdev bus: the mdev module is not loaded, so there is no mediated device.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(SysfsError { path: bus, source }),
    };
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| SysfsError {
            path: bus.clone(),
            source,
        })?;
        let device = entry.path();
        let resolved = fs::canonicalize(&device).map_err(|source| SysfsError {
            path: device.clone(),
            source,
        })?;
        let Some(parent) = resolved.parent() else {
            continue;
        };
        if !sysfs_pci::is_nvidia_gpu(parent) {
            continue;
        }
        let kind = fs::read_to_string(device.join("mdev_type/name"))
            .ok()
            .and_then(|name| type_name(&name).map(str::to_owned))
            .unwrap_or_else(|| "unknown type".to_owned());
        found.push(format!(
            "{} ({kind}) on {}",
            entry.file_name().to_string_lossy(),
            sysfs_pci::address_of(parent)
        ));
    }
    found.sort();
    Ok(found)
}

/// `<VF> (vGPU type <id>) of <PF>` for each virtual function of an NVIDIA GPU with a vGPU type.
fn vendor_vfio_devices(sysfs: &Path) -> Result<Vec<String>, SysfsError> {
    let mut found = Vec::new();
    for gpu in sysfs_pci::nvidia_gpus(sysfs)? {
        if gpu.sriov.is_none() {
            continue;
        }
        for vf in sysfs_pci::virtual_functions(&gpu.dir)? {
            let Ok(text) = fs::read_to_string(vf.join(CURRENT_VGPU_TYPE)) else {
                continue;
            };
            let current = text.trim();
            if current.is_empty() || current == "0" {
                continue;
            }
            found.push(format!(
                "{} (vGPU type {current}) of {}",
                sysfs_pci::address_of(&vf),
                gpu.address
            ));
        }
    }
    Ok(found)
}

/// Runs the check on the sysfs tree at `sysfs`.
pub fn check(sysfs: &Path) -> Outcome {
    let unreadable = |e: SysfsError| Failed::new(reason::SYSFS_UNREADABLE, e.to_string());
    let mediated = mediated_devices(sysfs).map_err(unreadable)?;
    let vendor_vfio = vendor_vfio_devices(sysfs).map_err(unreadable)?;
    let all: Vec<&String> = mediated.iter().chain(&vendor_vfio).collect();
    if all.is_empty() {
        return Err(Failed::new(
            reason::NO_VGPU_DEVICES,
            format!(
                "no vGPU device on the node: no mediated device of an NVIDIA GPU under {} and no virtual function of an NVIDIA GPU with a vGPU type in {CURRENT_VGPU_TYPE}; the vGPU device manager (DaemonSet nvidia-vgpu-device-manager) creates them from the node's nvidia.com/vgpu.config label: check its pod on this node",
                sysfs.join(MDEV_DEVICES).display()
            ),
        ));
    }
    let mut listed = all
        .iter()
        .take(LISTED)
        .map(|d| d.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    if all.len() > LISTED {
        let _ = write!(listed, " and {} more", all.len() - LISTED);
    }
    passed(
        reason::VGPU_DEVICES_VALIDATED,
        format!("vGPU devices ({}): {listed}", all.len()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::components::fake_sysfs::{FakeSysfs, Gpu};

    const UUID_A: &str = "1c4b3a82-90b4-4d3e-9c7e-2f1a6c0d5e11";
    const UUID_B: &str = "7d2e9f10-3a6b-4c8d-8e1f-0a9b8c7d6e55";

    #[test]
    fn mediated_devices_of_nvidia_gpus_pass() {
        // An A100 host on the mdev framework: the GPU is an mdev parent, two vGPUs were created.
        let sys = FakeSysfs::new();
        sys.gpu(&Gpu::new("0000:3b:00.0").driver("nvidia"));
        sys.mdev_parent("0000:3b:00.0", 256, "NVIDIA A100-4C");
        sys.mdev("0000:3b:00.0", 256, UUID_B);
        sys.mdev("0000:3b:00.0", 256, UUID_A);
        let passed = check(sys.root()).unwrap();
        assert_eq!(passed.reason, "VgpuDevicesValidated");
        assert_eq!(
            passed.message,
            format!(
                "vGPU devices (2): {UUID_A} (A100-4C) on 0000:3b:00.0, {UUID_B} (A100-4C) on 0000:3b:00.0"
            )
        );
    }

    #[test]
    fn virtual_functions_with_a_vgpu_type_pass() {
        // An L40S host on the vendor-specific VFIO framework: 2 VFs, one holding a vGPU.
        let sys = FakeSysfs::new();
        sys.gpu(&Gpu::new("0000:41:00.0").driver("nvidia").sriov(32, 2));
        sys.vgpu_type("0000:41:00.4", 0);
        sys.vgpu_type("0000:41:00.5", 1149);
        let passed = check(sys.root()).unwrap();
        assert_eq!(
            passed.message,
            "vGPU devices (1): 0000:41:00.5 (vGPU type 1149) of 0000:41:00.0"
        );
    }

    #[test]
    fn no_vgpu_device_fails_naming_where_it_looked() {
        let sys = FakeSysfs::new();
        sys.gpu(&Gpu::new("0000:41:00.0").driver("nvidia").sriov(32, 2));
        sys.vgpu_type("0000:41:00.4", 0);
        sys.vgpu_type("0000:41:00.5", 0);
        // A mediated device of another vendor's parent (an Intel GVT-g iGPU) does not count.
        sys.device("0000:00:02.0", "0x8086", "0x030000");
        sys.mdev_parent("0000:00:02.0", 1, "i915-GVTg_V5_4");
        sys.mdev("0000:00:02.0", 1, UUID_A);
        let failed = check(sys.root()).unwrap_err();
        assert_eq!(failed.reason, "NoVgpuDevices");
        assert!(!failed.permanent);
        assert_eq!(
            failed.message,
            format!(
                "no vGPU device on the node: no mediated device of an NVIDIA GPU under {}/bus/mdev/devices and no virtual function of an NVIDIA GPU with a vGPU type in nvidia/current_vgpu_type; the vGPU device manager (DaemonSet nvidia-vgpu-device-manager) creates them from the node's nvidia.com/vgpu.config label: check its pod on this node",
                sys.root().display()
            )
        );
    }

    #[test]
    fn long_lists_are_cut() {
        let sys = FakeSysfs::new();
        sys.gpu(&Gpu::new("0000:41:00.0").driver("nvidia").sriov(32, 10));
        for i in 0..10 {
            sys.vgpu_type(&sys.vf_address("0000:41:00.0", i), 1150);
        }
        let message = check(sys.root()).unwrap().message;
        assert!(message.starts_with("vGPU devices (10): "), "{message}");
        assert!(message.ends_with(" and 2 more"), "{message}");
    }
}
