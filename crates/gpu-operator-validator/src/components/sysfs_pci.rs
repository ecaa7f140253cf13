//! The NVIDIA GPUs in the host's sysfs, as the sandbox components see them: PCI devices under
//! `bus/pci/devices` of vendor `0x10de` and class `0x0300xx` (VGA) or `0x0302xx` (3D controller),
//! each with the driver it is bound to and its SR-IOV state. Only reads files and symlinks, so
//! tests point it at a fake tree.
//!
//! The layout is the kernel's (`Documentation/ABI/testing/sysfs-bus-pci`,
//! `Documentation/PCI/sysfs-pci.rst`): `vendor` and `class` hold hexadecimal ids, `driver` is a
//! symlink to the bound driver's directory, an SR-IOV physical function has `sriov_totalvfs`,
//! `sriov_numvfs` and `virtfnN` links, and a virtual function has a `physfn` link.

use std::{
    fs, io,
    path::{Path, PathBuf},
};

/// The PCI devices, relative to the sysfs root.
pub const PCI_DEVICES: &str = "bus/pci/devices";
/// NVIDIA's PCI vendor id.
const NVIDIA_VENDOR: u32 = 0x10de;
/// PCI base class and subclass of a VGA controller (older GPUs).
const VGA_CONTROLLER: u32 = 0x0300;
/// PCI base class and subclass of a 3D controller (data-center GPUs).
const CONTROLLER_3D: u32 = 0x0302;

/// A sysfs file or directory could not be read.
#[derive(Debug, thiserror::Error)]
#[error("reading {path}: {source}")]
pub struct SysfsError {
    /// What was read.
    pub path: PathBuf,
    /// Why it failed.
    pub source: io::Error,
}

impl SysfsError {
    fn at(path: &Path) -> impl FnOnce(io::Error) -> Self {
        let path = path.to_path_buf();
        move |source| Self { path, source }
    }
}

/// The SR-IOV state of a physical function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sriov {
    /// `sriov_totalvfs`: the virtual functions it can have.
    pub total_vfs: u64,
    /// `sriov_numvfs`: the virtual functions enabled now.
    pub enabled_vfs: u64,
}

/// An NVIDIA GPU (a physical function, never a virtual one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PciGpu {
    /// Its PCI address, e.g. `0000:3b:00.0`.
    pub address: String,
    /// Its sysfs directory.
    pub dir: PathBuf,
    /// The driver it is bound to (the `driver` link's last component), if any.
    pub driver: Option<String>,
    /// Its SR-IOV state, when it supports SR-IOV.
    pub sriov: Option<Sriov>,
}

/// A hexadecimal sysfs id such as `0x10de` or `0x030200`.
fn parse_hex(text: &str) -> Option<u32> {
    let text = text.trim();
    u32::from_str_radix(text.strip_prefix("0x").unwrap_or(text), 16).ok()
}

fn read_trimmed(path: &Path) -> Result<String, SysfsError> {
    fs::read_to_string(path)
        .map(|s| s.trim().to_owned())
        .map_err(SysfsError::at(path))
}

/// Whether the PCI device in `dir` is an NVIDIA GPU (by `vendor` and `class`); a device without
/// those files is not one.
pub fn is_nvidia_gpu(dir: &Path) -> bool {
    let id = |name| {
        fs::read_to_string(dir.join(name))
            .ok()
            .and_then(|t| parse_hex(&t))
    };
    id("vendor") == Some(NVIDIA_VENDOR)
        && id("class").is_some_and(|class| matches!(class >> 8, VGA_CONTROLLER | CONTROLLER_3D))
}

/// Whether the PCI device in `dir` is an SR-IOV virtual function (it has a `physfn` link).
pub fn is_virtual_function(dir: &Path) -> bool {
    fs::symlink_metadata(dir.join("physfn")).is_ok()
}

/// The driver the device in `dir` is bound to: the name its `driver` link points at.
pub fn bound_driver(dir: &Path) -> Result<Option<String>, SysfsError> {
    let link = dir.join("driver");
    match fs::read_link(&link) {
        Ok(target) => Ok(target
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(SysfsError::at(&link)(e)),
    }
}

fn sriov(dir: &Path) -> Result<Option<Sriov>, SysfsError> {
    let total = dir.join("sriov_totalvfs");
    if !total.exists() {
        return Ok(None);
    }
    let count = |path: &Path| -> Result<u64, SysfsError> {
        let text = read_trimmed(path)?;
        text.parse().map_err(|_| SysfsError {
            path: path.to_path_buf(),
            source: io::Error::new(io::ErrorKind::InvalidData, format!("{text:?} is no count")),
        })
    };
    Ok(Some(Sriov {
        total_vfs: count(&total)?,
        enabled_vfs: count(&dir.join("sriov_numvfs"))?,
    }))
}

/// The NVIDIA GPUs under `<sysfs>/bus/pci/devices`, by address, without virtual functions.
pub fn nvidia_gpus(sysfs: &Path) -> Result<Vec<PciGpu>, SysfsError> {
    let devices = sysfs.join(PCI_DEVICES);
    let mut gpus = Vec::new();
    for entry in fs::read_dir(&devices).map_err(SysfsError::at(&devices))? {
        let entry = entry.map_err(SysfsError::at(&devices))?;
        let dir = entry.path();
        if !is_nvidia_gpu(&dir) || is_virtual_function(&dir) {
            continue;
        }
        gpus.push(PciGpu {
            address: entry.file_name().to_string_lossy().into_owned(),
            driver: bound_driver(&dir)?,
            sriov: sriov(&dir)?,
            dir,
        });
    }
    gpus.sort_by(|a, b| a.address.cmp(&b.address));
    Ok(gpus)
}

/// The virtual functions of the physical function in `dir`: the directories its `virtfnN` links
/// point at, by index.
pub fn virtual_functions(dir: &Path) -> Result<Vec<PathBuf>, SysfsError> {
    let mut functions: Vec<(u32, PathBuf)> = Vec::new();
    for entry in fs::read_dir(dir).map_err(SysfsError::at(dir))? {
        let entry = entry.map_err(SysfsError::at(dir))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(index) = name
            .strip_prefix("virtfn")
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        functions.push((index, entry.path()));
    }
    functions.sort();
    Ok(functions.into_iter().map(|(_, path)| path).collect())
}

/// The PCI address a device directory (or a link to one) names.
pub fn address_of(path: &Path) -> String {
    fs::canonicalize(path)
        .ok()
        .as_deref()
        .and_then(Path::file_name)
        .or_else(|| path.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::components::fake_sysfs::{FakeSysfs, Gpu};

    #[test]
    fn finds_nvidia_gpus_by_vendor_and_class_and_skips_the_rest() {
        let sys = FakeSysfs::new();
        sys.gpu(&Gpu::new("0000:5e:00.0").driver("vfio-pci"));
        sys.gpu(&Gpu::new("0000:3b:00.0").class("0x030000").driver("nvidia"));
        sys.device("0000:3b:00.1", "0x10de", "0x040300"); // the GPU's HDMI audio function
        sys.device("0000:00:1f.6", "0x8086", "0x020000"); // an Intel NIC
        let gpus = nvidia_gpus(sys.root()).unwrap();
        let found: Vec<_> = gpus
            .iter()
            .map(|g| (g.address.as_str(), g.driver.as_deref()))
            .collect();
        assert_eq!(
            found,
            [
                ("0000:3b:00.0", Some("nvidia")),
                ("0000:5e:00.0", Some("vfio-pci"))
            ]
        );
    }

    #[test]
    fn reads_sriov_and_leaves_virtual_functions_out() {
        let sys = FakeSysfs::new();
        sys.gpu(&Gpu::new("0000:41:00.0").driver("nvidia").sriov(16, 2));
        let gpus = nvidia_gpus(sys.root()).unwrap();
        assert_eq!(gpus.len(), 1, "{gpus:?}");
        assert_eq!(
            gpus[0].sriov,
            Some(Sriov {
                total_vfs: 16,
                enabled_vfs: 2
            })
        );
        let vfs: Vec<_> = virtual_functions(&gpus[0].dir)
            .unwrap()
            .iter()
            .map(|vf| address_of(vf))
            .collect();
        assert_eq!(vfs, ["0000:41:00.4", "0000:41:00.5"]);
    }

    #[test]
    fn a_missing_devices_directory_is_an_error_naming_it() {
        let sys = tempfile::tempdir().unwrap();
        let err = nvidia_gpus(sys.path()).unwrap_err();
        assert_eq!(err.path, sys.path().join("bus/pci/devices"));
    }
}
