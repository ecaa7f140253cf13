//! Tests of the driver check against simulated host roots: every success and failure path.

use gpu_operator_api::validator::reason;

use super::check;
use crate::{
    nvml::NvmlError,
    status_files::parse_key_values,
    testing::{FakeNvml, Fixture, unloadable},
};

fn key(text: &str, name: &str) -> String {
    parse_key_values(text)
        .into_iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v)
        .unwrap()
}

#[test]
fn a_host_driver_passes_through_nvml_and_writes_host_paths() {
    let f = Fixture::new("driver");
    f.load_module("570.172.08");
    f.install_smi(&f.host(), "570.172.08", 8);
    let lib = f.install_nvml(&f.host());
    let nvml = FakeNvml::ok("570.172.08", 8);
    let passed = check(&f.config(), &nvml).unwrap();
    assert_eq!(passed.reason, reason::DRIVER_VALIDATED);
    assert!(
        passed.message.contains("driver 570.172.08")
            && passed.message.contains("8 GPUs")
            && passed.message.contains("via NVML")
            && passed.message.contains("host driver"),
        "{}",
        passed.message
    );
    assert_eq!(nvml.loaded(), [lib], "NVML is loaded from the host root");
    assert_eq!(key(&passed.status_file, "IS_HOST_DRIVER"), "true");
    assert_eq!(key(&passed.status_file, "NVIDIA_DRIVER_ROOT"), "/");
    assert_eq!(key(&passed.status_file, "DRIVER_ROOT_CTR_PATH"), "/host");
}

#[test]
fn when_nvml_fails_to_load_nvidia_smi_answers() {
    let f = Fixture::new("driver");
    f.load_module("570.172.08");
    f.install_smi(&f.host(), "570.172.08", 4);
    let nvml = unloadable();
    let passed = check(&f.config(), &nvml).unwrap();
    assert!(
        passed.message.contains("4 GPUs") && passed.message.contains("via nvidia-smi"),
        "{}",
        passed.message
    );
    assert!(
        nvml.loaded().is_empty(),
        "no library in the root: nothing to load"
    );
    // With a library present that NVML cannot load, the fallback still answers.
    f.install_nvml(&f.host());
    let passed = check(&f.config(), &nvml).unwrap();
    assert!(passed.message.contains("via nvidia-smi"));
    assert_eq!(nvml.loaded().len(), 1);
}

#[test]
fn a_driver_container_is_used_when_the_host_has_none() {
    let mut f = Fixture::new("driver");
    f.set("DRIVER_INSTALL_DIR", "/run/nvidia/driver");
    f.load_module("570.172.08");
    f.install_smi(&f.driver_root(), "570.172.08", 1);
    std::fs::create_dir_all(f.driver_root().join("dev")).unwrap();
    std::fs::write(f.driver_root().join("dev/nvidiactl"), "").unwrap();
    let passed = check(&f.config(), &unloadable()).unwrap();
    assert!(
        passed.message.contains("driver container"),
        "{}",
        passed.message
    );
    assert_eq!(key(&passed.status_file, "IS_HOST_DRIVER"), "false");
    assert_eq!(
        key(&passed.status_file, "NVIDIA_DRIVER_ROOT"),
        "/run/nvidia/driver"
    );
    assert_eq!(
        key(&passed.status_file, "DRIVER_ROOT_CTR_PATH"),
        "/driver-root"
    );
    assert_eq!(
        key(&passed.status_file, "DEV_ROOT_CTR_PATH"),
        "/driver-root"
    );
}

#[test]
fn no_driver_anywhere_is_driver_not_found() {
    let f = Fixture::new("driver");
    let failed = check(&f.config(), &FakeNvml::ok("1.0", 1)).unwrap_err();
    assert_eq!(failed.reason, reason::DRIVER_NOT_FOUND);
    assert!(
        failed.message.contains("usr/bin/nvidia-smi"),
        "{}",
        failed.message
    );
    assert!(!failed.permanent);
}

#[test]
fn an_unloaded_kernel_module_is_driver_not_loaded() {
    let f = Fixture::new("driver");
    f.install_smi(&f.host(), "570.172.08", 8);
    let failed = check(&f.config(), &FakeNvml::ok("570.172.08", 8)).unwrap_err();
    assert_eq!(failed.reason, reason::DRIVER_NOT_LOADED);
    assert!(failed.message.contains("proc/driver/nvidia/version"));
}

#[test]
fn module_and_library_versions_must_agree() {
    let f = Fixture::new("driver");
    f.load_module("570.133.20");
    f.install_smi(&f.host(), "570.172.08", 8);
    f.install_nvml(&f.host());
    let failed = check(&f.config(), &FakeNvml::ok("570.172.08", 8)).unwrap_err();
    assert_eq!(failed.reason, reason::DRIVER_VERSION_MISMATCH);
    assert!(
        failed.message.contains("570.133.20") && failed.message.contains("570.172.08"),
        "{}",
        failed.message
    );
    // NVML saying so itself.
    let failed = check(&f.config(), &FakeNvml::failing(NvmlError::VersionMismatch)).unwrap_err();
    assert_eq!(failed.reason, reason::DRIVER_VERSION_MISMATCH);
    // nvidia-smi saying so.
    f.install_smi_script(
        &f.host(),
        "echo 'Failed to initialize NVML: Driver/library version mismatch'; exit 18",
    );
    let failed = check(&f.config(), &unloadable()).unwrap_err();
    assert_eq!(failed.reason, reason::DRIVER_VERSION_MISMATCH);
}

#[test]
fn no_gpu_is_reported_as_such() {
    let f = Fixture::new("driver");
    f.load_module("570.172.08");
    f.install_smi(&f.host(), "570.172.08", 0);
    let failed = check(&f.config(), &unloadable()).unwrap_err();
    assert_eq!(failed.reason, reason::NO_GPU, "{failed:?}");
    f.install_nvml(&f.host());
    let failed = check(&f.config(), &FakeNvml::ok("570.172.08", 0)).unwrap_err();
    assert_eq!(failed.reason, reason::NO_GPU);
    assert!(failed.message.contains("sees no GPU"));
}

#[test]
fn when_nvml_and_nvidia_smi_both_fail_the_message_has_both() {
    let f = Fixture::new("driver");
    f.load_module("570.172.08");
    f.install_smi_script(&f.host(), "echo 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver' >&2; exit 9");
    f.install_nvml(&f.host());
    let failed = check(&f.config(), &FakeNvml::failing(NvmlError::DriverNotLoaded)).unwrap_err();
    assert_eq!(failed.reason, reason::DRIVER_QUERY_FAILED);
    assert!(
        failed.message.contains("kernel driver is not loaded")
            && failed.message.contains("could not communicate"),
        "{}",
        failed.message
    );
}

#[test]
fn a_hanging_nvidia_smi_times_out() {
    let mut f = Fixture::new("driver");
    f.set("NVIDIA_SMI_TIMEOUT_SECONDS", "1");
    f.load_module("570.172.08");
    f.install_smi_script(&f.host(), "exec sleep 30");
    let failed = check(&f.config(), &unloadable()).unwrap_err();
    assert_eq!(failed.reason, reason::NVIDIA_SMI_TIMEOUT);
}

#[test]
fn skip_gpu_init_uses_the_version_only() {
    let mut f = Fixture::new("driver");
    f.set("DRIVER_VALIDATION_SKIP_GPU_INIT", "true");
    f.load_module("570.172.08");
    f.install_smi(&f.host(), "570.172.08", 8);
    let nvml = FakeNvml::ok("570.172.08", 8);
    let passed = check(&f.config(), &nvml).unwrap();
    assert!(
        passed.message.contains("not initialized"),
        "{}",
        passed.message
    );
    assert!(nvml.loaded().is_empty());
}

#[test]
fn fixing_the_host_turns_the_check_green() {
    let f = Fixture::new("driver");
    f.install_smi(&f.host(), "570.172.08", 8);
    assert!(check(&f.config(), &unloadable()).is_err());
    f.load_module("570.172.08");
    assert!(check(&f.config(), &unloadable()).is_ok());
    f.unload_module();
    assert_eq!(
        check(&f.config(), &unloadable()).unwrap_err().reason,
        reason::DRIVER_NOT_LOADED
    );
}

#[test]
fn an_operator_managed_driver_container_is_checked_only_once_it_has_finished() {
    let mut f = Fixture::new("driver");
    f.set("DRIVER_MANAGED_BY_OPERATOR", "true");
    f.load_module("570.172.08");
    f.install_smi(&f.driver_root(), "570.172.08", 2);
    let waiting = check(&f.config(), &unloadable()).unwrap_err();
    assert_eq!(waiting.reason, reason::DRIVER_CONTAINER_NOT_READY);
    assert!(!waiting.permanent, "WITH_WAIT retries until it finishes");

    let output = f.config().output_dir;
    std::fs::create_dir_all(&output).unwrap();
    std::fs::write(output.join(".driver-ctr-ready"), "GDS_ENABLED=true\n").unwrap();
    std::fs::write(f.host().join("proc/modules"), "nvidia 1 0 - Live 0x0\n").unwrap();
    let missing = check(&f.config(), &unloadable()).unwrap_err();
    assert_eq!(missing.reason, reason::DRIVER_NOT_LOADED);
    assert!(missing.message.contains("nvidia_fs"), "{}", missing.message);

    std::fs::write(f.host().join("proc/modules"), "nvidia_fs 1 0 - Live 0x0\n").unwrap();
    let passed = check(&f.config(), &unloadable()).unwrap();
    assert!(
        passed.message.contains("driver container"),
        "{}",
        passed.message
    );
}
