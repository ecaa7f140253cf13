//! Test support: a fake sysfs tree under a tempdir, laid out as a real host's, for the sandbox
//! components' tests.
//!
//! Where the layout comes from:
//! - PCI devices: the kernel's `Documentation/ABI/testing/sysfs-bus-pci` and
//!   `Documentation/PCI/sysfs-pci.rst`. Each device is a directory under
//!   `devices/pci0000:00/<address>` holding `vendor` (`0x10de`) and `class` (`0x030200`: a 3D
//!   controller, as read on a real H100 host), and `bus/pci/devices/<address>` is a relative
//!   symlink to it. A bound device has a `driver` symlink to `bus/pci/drivers/<name>`
//!   (`Documentation/driver-api/driver-model/binding.rst`).
//! - SR-IOV (same ABI file): a physical function has `sriov_totalvfs`, `sriov_numvfs` and one
//!   `virtfnN` link per enabled virtual function, which has a `physfn` link back.
//! - Mediated devices: the kernel's `Documentation/driver-api/vfio-mediated-device.rst`. A parent
//!   is linked from `class/mdev_bus/<address>` and lists `mdev_supported_types/<type>/name`; a
//!   vGPU is the directory `<parent>/<UUID>` with an `mdev_type` link to its type, linked from
//!   `bus/mdev/devices/<UUID>`. Type names are NVIDIA's (`nvidia-<id>`, name `NVIDIA A100-4C`, as
//!   in NVIDIA's go-nvlib `pkg/nvmdev`).
//! - NVIDIA's vendor-specific VFIO framework (vGPU 17 and later on Ada, Hopper and newer GPUs):
//!   each virtual function has `nvidia/current_vgpu_type` (`0`: no vGPU, else the vGPU type id)
//!   and `nvidia/creatable_vgpu_types`, as NVIDIA's vGPU user guide ("Creating an NVIDIA vGPU on
//!   a Linux with KVM hypervisor") and its `vgpu-device-manager` (`pkg/vgpu/vfio/sysfs.go`)
//!   describe them.
#![allow(
    clippy::unused_self,
    reason = "builder methods read best on the fixture"
)]

use std::{
    fs,
    os::unix::fs::symlink,
    path::{Path, PathBuf},
};

/// A fake `/sys`.
pub struct FakeSysfs {
    dir: tempfile::TempDir,
}

/// A GPU to put into the tree.
#[derive(Clone)]
pub struct Gpu {
    address: String,
    class: String,
    driver: Option<String>,
    sriov: Option<(u64, u64)>,
}

impl Gpu {
    /// An NVIDIA 3D controller at `address`, bound to no driver, without SR-IOV.
    pub fn new(address: &str) -> Self {
        Self {
            address: address.to_owned(),
            class: "0x030200".to_owned(),
            driver: None,
            sriov: None,
        }
    }

    /// Its PCI class.
    pub fn class(mut self, class: &str) -> Self {
        self.class = class.to_owned();
        self
    }

    /// Binds it to `driver`.
    pub fn driver(mut self, driver: &str) -> Self {
        self.driver = Some(driver.to_owned());
        self
    }

    /// Makes it an SR-IOV physical function with `enabled` of `total` virtual functions on.
    pub fn sriov(mut self, total: u64, enabled: u64) -> Self {
        self.sriov = Some((total, enabled));
        self
    }
}

const PCI_ROOT: &str = "devices/pci0000:00";

impl FakeSysfs {
    /// An empty tree with the directories every host has.
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        for sub in ["bus/pci/devices", "bus/pci/drivers", PCI_ROOT] {
            fs::create_dir_all(dir.path().join(sub)).unwrap();
        }
        Self { dir }
    }

    /// The root, what `/sys` would be.
    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// The real directory of the device at `address`.
    pub fn device_dir(&self, address: &str) -> PathBuf {
        self.root().join(PCI_ROOT).join(address)
    }

    /// A PCI device of any vendor and class, bound to nothing.
    pub fn device(&self, address: &str, vendor: &str, class: &str) -> PathBuf {
        let dir = self.device_dir(address);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("vendor"), format!("{vendor}\n")).unwrap();
        fs::write(dir.join("class"), format!("{class}\n")).unwrap();
        symlink(
            format!("../../../{PCI_ROOT}/{address}"),
            self.root().join("bus/pci/devices").join(address),
        )
        .unwrap();
        dir
    }

    /// Binds the device at `address` to `driver` (or unbinds it).
    pub fn bind(&self, address: &str, driver: Option<&str>) {
        let link = self.device_dir(address).join("driver");
        let _ = fs::remove_file(&link);
        if let Some(driver) = driver {
            fs::create_dir_all(self.root().join("bus/pci/drivers").join(driver)).unwrap();
            symlink(format!("../../../bus/pci/drivers/{driver}"), link).unwrap();
        }
    }

    /// Puts `gpu` into the tree, with its virtual functions (bound to `nvidia`) when SR-IOV is on.
    pub fn gpu(&self, gpu: &Gpu) -> PathBuf {
        let dir = self.device(&gpu.address, "0x10de", &gpu.class);
        self.bind(&gpu.address, gpu.driver.as_deref());
        if let Some((total, enabled)) = gpu.sriov {
            fs::write(dir.join("sriov_totalvfs"), format!("{total}\n")).unwrap();
            fs::write(dir.join("sriov_numvfs"), format!("{enabled}\n")).unwrap();
            for index in 0..enabled {
                let vf = self.vf_address(&gpu.address, index);
                let vf_dir = self.device(&vf, "0x10de", &gpu.class);
                self.bind(&vf, Some("nvidia"));
                symlink(format!("../{}", gpu.address), vf_dir.join("physfn")).unwrap();
                symlink(format!("../{vf}"), dir.join(format!("virtfn{index}"))).unwrap();
            }
        }
        dir
    }

    /// The address of virtual function `index` of the physical function at `pf` (functions 4, 5,
    /// … of the same bus, as NVIDIA's GPUs number them).
    pub fn vf_address(&self, pf: &str, index: u64) -> String {
        let (bus, _) = pf.rsplit_once(':').unwrap();
        let function = 4 + index;
        format!("{bus}:{:02x}.{}", function / 8, function % 8)
    }

    /// Registers the device at `address` as an mdev parent offering vGPU type `type_id` named
    /// `name` (e.g. `NVIDIA A100-4C`).
    pub fn mdev_parent(&self, address: &str, type_id: u32, name: &str) {
        let types = self
            .device_dir(address)
            .join("mdev_supported_types")
            .join(format!("nvidia-{type_id}"));
        fs::create_dir_all(&types).unwrap();
        fs::write(types.join("name"), format!("{name}\n")).unwrap();
        fs::write(types.join("available_instances"), "10\n").unwrap();
        let class = self.root().join("class/mdev_bus");
        fs::create_dir_all(&class).unwrap();
        symlink(format!("../../{PCI_ROOT}/{address}"), class.join(address)).unwrap();
    }

    /// Creates the vGPU `uuid` of type `type_id` on the mdev parent at `address`.
    pub fn mdev(&self, address: &str, type_id: u32, uuid: &str) {
        let dir = self.device_dir(address).join(uuid);
        fs::create_dir_all(&dir).unwrap();
        symlink(
            format!("../mdev_supported_types/nvidia-{type_id}"),
            dir.join("mdev_type"),
        )
        .unwrap();
        let bus = self.root().join("bus/mdev/devices");
        fs::create_dir_all(&bus).unwrap();
        symlink(
            format!("../../../{PCI_ROOT}/{address}/{uuid}"),
            bus.join(uuid),
        )
        .unwrap();
    }

    /// Gives the virtual function at `address` NVIDIA's vendor-specific VFIO files, with
    /// `current` as its vGPU type (`0`: none).
    pub fn vgpu_type(&self, address: &str, current: u32) {
        let dir = self.device_dir(address).join("nvidia");
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("current_vgpu_type"), format!("{current}\n")).unwrap();
        fs::write(
            dir.join("creatable_vgpu_types"),
            "ID    : vGPU Name\n1149  : NVIDIA L40S-4Q\n1150  : NVIDIA L40S-8Q\n",
        )
        .unwrap();
    }
}
