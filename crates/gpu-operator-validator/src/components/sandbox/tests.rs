//! Tests of the sandbox gate: the workload config from the node's labels, the `workload-type`
//! file, which components run where, and the dispatch to each check (on a fake sysfs, see
//! `fake_sysfs` for where its layout comes from).

use std::fs;

use super::*;
use crate::{
    components::{
        FileToWrite,
        fake_sysfs::{FakeSysfs, Gpu},
    },
    testing::Fixture,
};

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn fixture(component: &str, sysfs: &FakeSysfs) -> Fixture {
    let mut f = Fixture::new(component);
    f.set("NODE_NAME", "gpu-node-1");
    f.set("SYSFS_ROOT", sysfs.root().to_str().unwrap());
    f
}

fn workload_type(f: &Fixture) -> String {
    fs::read_to_string(f.dir.path().join("validations/workload-type")).unwrap()
}

#[test]
fn the_label_wins_and_an_invalid_or_missing_one_falls_back_to_the_default() {
    let vgpu = labels(&[("nvidia.com/gpu.workload.config", "vm-vgpu")]);
    assert_eq!(
        workload_of(&vgpu, WorkloadConfig::VmPassthrough),
        WorkloadConfig::VmVgpu
    );
    let bad = labels(&[("nvidia.com/gpu.workload.config", "vm")]);
    assert_eq!(
        workload_of(&bad, WorkloadConfig::Container),
        WorkloadConfig::Container
    );
    assert_eq!(
        workload_of(&labels(&[]), WorkloadConfig::VmPassthrough),
        WorkloadConfig::VmPassthrough
    );
}

#[test]
fn vfio_pci_runs_on_passthrough_nodes_and_writes_the_workload_type() {
    let sys = FakeSysfs::new();
    sys.gpu(&Gpu::new("0000:3b:00.0").driver("vfio-pci"));
    let f = fixture("vfio-pci", &sys);
    // No label: NVIDIA's default, vm-passthrough.
    let passed = check_on(&f.config(), &labels(&[])).unwrap();
    assert_eq!(passed.reason, "VfioPciValidated");
    assert_eq!(passed.file, FileToWrite::ComponentFile);
    assert_eq!(workload_type(&f), "vm-passthrough\n");
}

#[test]
fn a_bound_to_nvidia_gpu_fails_vfio_pci_through_the_gate() {
    let sys = FakeSysfs::new();
    sys.gpu(&Gpu::new("0000:3b:00.0").driver("nvidia"));
    let f = fixture("vfio-pci", &sys);
    let node = labels(&[("nvidia.com/gpu.workload.config", "vm-passthrough")]);
    let failed = check_on(&f.config(), &node).unwrap_err();
    assert_eq!(failed.reason, "GPUNotBoundToVfio");
    assert_eq!(
        workload_type(&f),
        "vm-passthrough\n",
        "written before the check"
    );
}

#[test]
fn components_of_another_workload_pass_without_a_status_file() {
    let sys = FakeSysfs::new(); // no GPU at all: the checks must not even run
    let mut f = fixture("vgpu-devices", &sys);
    f.set("DEFAULT_GPU_WORKLOAD_CONFIG", "vm-passthrough");
    let passed = check_on(&f.config(), &labels(&[])).unwrap();
    assert_eq!(passed.reason, "NotRequired");
    assert_eq!(passed.file, FileToWrite::Nothing);
    assert_eq!(
        passed.message,
        "vgpu-devices is not needed on a vm-passthrough node (only on vm-vgpu; the node's nvidia.com/gpu.workload.config label, else DEFAULT_GPU_WORKLOAD_CONFIG)"
    );
    assert_eq!(workload_type(&f), "vm-passthrough\n");

    let f = fixture("vfio-pci", &sys);
    let node = labels(&[("nvidia.com/gpu.workload.config", "container")]);
    assert_eq!(
        check_on(&f.config(), &node).unwrap().file,
        FileToWrite::Nothing
    );
    assert_eq!(workload_type(&f), "container\n");
}

#[test]
fn vgpu_devices_runs_on_vgpu_nodes() {
    let sys = FakeSysfs::new();
    sys.gpu(&Gpu::new("0000:41:00.0").driver("nvidia").sriov(16, 1));
    let f = fixture("vgpu-devices", &sys);
    let node = labels(&[("nvidia.com/gpu.workload.config", "vm-vgpu")]);
    let failed = check_on(&f.config(), &node).unwrap_err();
    assert_eq!(failed.reason, "NoVgpuDevices");
    sys.vgpu_type("0000:41:00.4", 1149);
    assert_eq!(
        check_on(&f.config(), &node).unwrap().reason,
        "VgpuDevicesValidated"
    );
    assert_eq!(workload_type(&f), "vm-vgpu\n");
}

#[test]
fn vgpu_manager_runs_on_vgpu_nodes() {
    let sys = FakeSysfs::new();
    sys.gpu(&Gpu::new("0000:3b:00.0").driver("nvidia"));
    sys.mdev_parent("0000:3b:00.0", 256, "NVIDIA A100-4C");
    let f = fixture("vgpu-manager", &sys);
    f.install_smi(&f.host(), "570.172.07", 1);
    let node = labels(&[("nvidia.com/gpu.workload.config", "vm-vgpu")]);
    let passed = check_on(&f.config(), &node).unwrap();
    assert_eq!(passed.file, FileToWrite::Other("host-vgpu-manager-ready"));
}

#[test]
fn cc_manager_has_no_gate_and_writes_no_workload_type() {
    let sys = FakeSysfs::new();
    let f = fixture("cc-manager", &sys);
    let node = labels(&[("nvidia.com/gpu.workload.config", "container")]);
    assert_eq!(check_on(&f.config(), &node).unwrap().reason, "NotRequired");
    assert!(!f.dir.path().join("validations/workload-type").exists());
}
