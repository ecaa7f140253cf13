//! Tests of the `vgpu-manager` check: a fake `nvidia-smi` under the host root or the driver
//! install dir (see `crate::testing`) and a fake sysfs (see `fake_sysfs` for where its layout
//! comes from).

use super::*;
use crate::{
    components::fake_sysfs::{FakeSysfs, Gpu},
    testing::Fixture,
};

fn fixture() -> Fixture {
    let mut f = Fixture::new("vgpu-manager");
    f.set("NODE_NAME", "gpu-node-1");
    f
}

/// An A100 host on the mdev framework whose GPU the vGPU host driver registered.
fn mdev_host() -> FakeSysfs {
    let sys = FakeSysfs::new();
    sys.gpu(&Gpu::new("0000:3b:00.0").driver("nvidia"));
    sys.mdev_parent("0000:3b:00.0", 256, "NVIDIA A100-4C");
    sys
}

#[test]
fn a_vgpu_manager_container_with_mdev_parents_passes_and_writes_its_file() {
    let f = fixture();
    f.install_smi(&f.driver_root(), "570.172.07", 1);
    let sys = mdev_host();
    let passed = check(&f.config(), sys.root()).unwrap();
    assert_eq!(passed.reason, "VgpuManagerValidated");
    assert_eq!(passed.file, FileToWrite::ComponentFile);
    assert_eq!(
        passed.message,
        format!(
            "vGPU host driver works: driver 570.172.07, CUDA 12.8, 1 GPU (1x NVIDIA H100 80GB HBM3) (vGPU manager container at {}/usr/bin/nvidia-smi); mdev parent devices: 0000:3b:00.0",
            f.driver_root().display()
        )
    );
}

#[test]
fn a_host_driver_wins_and_writes_host_vgpu_manager_ready() {
    let f = fixture();
    f.install_smi(&f.host(), "570.172.07", 1);
    f.install_smi(&f.driver_root(), "550.90.05", 1);
    let sys = mdev_host();
    let passed = check(&f.config(), sys.root()).unwrap();
    assert_eq!(passed.file, FileToWrite::Other("host-vgpu-manager-ready"));
    assert!(
        passed.message.contains("driver 570.172.07") && passed.message.contains("(host driver at"),
        "{}",
        passed.message
    );
}

#[test]
fn no_driver_anywhere_fails_naming_both_roots() {
    let f = fixture();
    let failed = check(&f.config(), mdev_host().root()).unwrap_err();
    assert_eq!(failed.reason, "VgpuManagerNotFound");
    assert!(!failed.permanent);
    assert!(
        failed.message.starts_with(&format!(
            "no vGPU host driver: no executable nvidia-smi under the host root {} nor under the driver install dir {} (looked in usr/bin/nvidia-smi, ",
            f.host().display(),
            f.driver_root().display()
        )),
        "{}",
        failed.message
    );
}

#[test]
fn a_failing_nvidia_smi_fails_the_check() {
    let f = fixture();
    f.install_smi_script(
        &f.driver_root(),
        "echo 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.'; exit 9",
    );
    let failed = check(&f.config(), mdev_host().root()).unwrap_err();
    assert_eq!(failed.reason, "VgpuManagerFailed");
    assert!(
        failed
            .message
            .starts_with("the vGPU host driver does not answer: ")
            && failed.message.contains("could not communicate"),
        "{}",
        failed.message
    );
}

#[test]
fn parent_devices_missing_fail_until_registered() {
    let f = fixture();
    f.install_smi(&f.driver_root(), "570.172.07", 1);
    let sys = FakeSysfs::new();
    sys.gpu(&Gpu::new("0000:3b:00.0").driver("nvidia"));
    let failed = check(&f.config(), sys.root()).unwrap_err();
    assert_eq!(failed.reason, "VgpuParentDevicesNotReady");
    assert_eq!(
        failed.message,
        format!(
            "the vGPU host driver has registered no parent device: no NVIDIA GPU under {}/class/mdev_bus and no GPU with SR-IOV virtual functions enabled; check the vGPU manager's pod on this node and that the GPUs support vGPU",
            sys.root().display()
        )
    );
    sys.mdev_parent("0000:3b:00.0", 256, "NVIDIA A100-4C");
    assert!(check(&f.config(), sys.root()).is_ok());
}

#[test]
fn sriov_needs_every_virtual_function_of_every_gpu() {
    // Two L40S on the vendor-specific VFIO framework; the second has only some VFs on.
    let sys = FakeSysfs::new();
    sys.gpu(&Gpu::new("0000:41:00.0").driver("nvidia").sriov(4, 4));
    sys.gpu(&Gpu::new("0000:c1:00.0").driver("nvidia").sriov(4, 1));
    let failed = parent_devices(sys.root()).unwrap_err();
    assert_eq!(failed.reason, "VgpuParentDevicesNotReady");
    assert_eq!(
        failed.message,
        "not every SR-IOV virtual function is enabled yet: 0000:c1:00.0 has 1 of 4 virtual functions; the vGPU manager enables them (sriov-manage -e ALL) after loading the driver: check its pod on this node"
    );

    let ready = FakeSysfs::new();
    ready.gpu(&Gpu::new("0000:41:00.0").driver("nvidia").sriov(4, 4));
    ready.gpu(&Gpu::new("0000:c1:00.0").driver("nvidia").sriov(4, 4));
    assert_eq!(
        parent_devices(ready.root()).unwrap(),
        "all 8 SR-IOV virtual functions of 2 GPUs enabled"
    );
}
