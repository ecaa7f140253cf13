//! The validator's parsers and its driver check on the real outputs of an NVIDIA H100 80GB HBM3
//! with driver 580.159.04 (`tests/fixtures`, see its README): an oracle this project did not
//! write, unlike the hand-written outputs of the other tests.

use std::{fs, path::Path};

use gpu_operator_api::validator::reason;

use crate::{
    components::driver::check,
    host, metrics,
    smi::{self, tests::script},
    smi_xml,
    testing::{Fixture, unloadable},
};

const CAPTURE: &str = "h100-80gb-hbm3_580.159.04";

fn fixture(kind: &str, extension: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(format!("{kind}_{CAPTURE}.{extension}"));
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn nvidia_smi_q_of_an_h100_gives_driver_cuda_and_one_named_gpu() {
    let info = smi::parse_query(Path::new("nvidia-smi"), &fixture("nvidia-smi-q", "txt")).unwrap();
    assert_eq!(info.driver_version, "580.159.04");
    assert_eq!(info.cuda_version.as_deref(), Some("13.0"));
    assert_eq!(info.gpus, Some(vec!["NVIDIA H100 80GB HBM3".to_owned()]));
}

#[test]
fn nvidia_smi_q_x_of_an_h100_gives_the_same_and_a_healthy_gpu() {
    let xml = fixture("nvidia-smi-q-x", "xml");
    let report = smi_xml::parse_query_xml(Path::new("nvidia-smi"), &xml).unwrap();
    let text = smi::parse_query(Path::new("nvidia-smi"), &fixture("nvidia-smi-q", "txt")).unwrap();
    assert_eq!(report.info, text, "the XML and the text say the same");
    let [gpu] = report.gpus.as_slice() else {
        panic!("one GPU: {report:?}")
    };
    assert_eq!(gpu.pci_bus_id, "00000000:00:06.0");
    assert_eq!(gpu.uuid, "GPU-ee673aa1-2a06-5f4a-fb88-6d432da3c95b");
    assert_eq!(
        gpu.mig_mode,
        Some(("Disabled".to_owned(), "Disabled".to_owned()))
    );
    assert_eq!(gpu.volatile_uncorrectable_ecc, Some(0));
    assert!(!gpu.remap_pending && !gpu.remap_failed);
}

#[test]
fn nvidia_smi_version_of_driver_580() {
    let info = smi::parse_version(
        Path::new("nvidia-smi"),
        &fixture("nvidia-smi-version", "txt"),
    )
    .unwrap();
    assert_eq!(info.driver_version, "580.159.04");
    assert_eq!(info.cuda_version.as_deref(), Some("13.0"));
    assert_eq!(info.gpus, None, "--version initializes no GPU");
}

#[test]
fn the_open_kernel_modules_version_line() {
    let text = fixture("proc-driver-nvidia-version", "txt");
    assert!(
        text.contains("Open Kernel Module"),
        "the capture is of the open module"
    );
    assert_eq!(
        host::parse_module_version(&text).as_deref(),
        Some("580.159.04")
    );
}

/// The driver check on a host root holding the real `/proc/driver/nvidia/version` and an
/// `nvidia-smi` that prints the real answers (NVML unloadable, so the fallback parses them).
#[test]
fn the_driver_check_passes_on_the_real_host_files() {
    let f = Fixture::new("driver");
    let version_file = f.host().join(host::MODULE_VERSION_FILE);
    fs::create_dir_all(version_file.parent().unwrap()).unwrap();
    fs::write(&version_file, fixture("proc-driver-nvidia-version", "txt")).unwrap();
    let answers = f.host().join("answers");
    fs::create_dir_all(&answers).unwrap();
    fs::write(answers.join("q"), fixture("nvidia-smi-q", "txt")).unwrap();
    fs::write(
        answers.join("version"),
        fixture("nvidia-smi-version", "txt"),
    )
    .unwrap();
    let dir = answers.display();
    script(
        &f.host().join("usr/bin/nvidia-smi"),
        &format!("case \"$1\" in --version) cat '{dir}/version' ;; *) cat '{dir}/q' ;; esac"),
    );
    let passed = check(&f.config(), &unloadable()).unwrap();
    assert_eq!(passed.reason, reason::DRIVER_VALIDATED);
    for part in [
        "driver 580.159.04",
        "CUDA 13.0",
        "NVIDIA H100 80GB HBM3",
        "via nvidia-smi",
    ] {
        assert!(
            passed.message.contains(part),
            "no `{part}` in {}",
            passed.message
        );
    }
}

/// The node status exporter's PCI count on a sysfs with the captured GPU's vendor, class and
/// device IDs beside the machine's other PCI functions (the capture lists their addresses only;
/// they get virtio's vendor ID here).
#[test]
fn the_pci_count_finds_the_captured_gpu() {
    let text = fixture("host-devices-ldconfig-os-pci", "txt");
    let gpu_line = text
        .lines()
        .find(|l| l.starts_with("/sys/bus/pci/devices/"))
        .unwrap();
    let fields: Vec<&str> = gpu_line.split_whitespace().collect();
    let (path, vendor, class, device) = (fields[0], fields[1], fields[2], fields[3]);
    assert_eq!((vendor, class, device), ("0x10de", "0x030200", "0x2330"));
    let host = tempfile::tempdir().unwrap();
    let devices = host.path().join("sys/bus/pci/devices");
    for address in text.lines().filter(|l| l.starts_with("0000:")) {
        fs::create_dir_all(devices.join(address.trim())).unwrap();
        fs::write(devices.join(address.trim()).join("vendor"), "0x1af4\n").unwrap();
    }
    let gpu = host.path().join(path.trim_start_matches('/'));
    for (file, value) in [("vendor", vendor), ("class", class), ("device", device)] {
        fs::write(gpu.join(file), format!("{value}\n")).unwrap();
    }
    assert_eq!(metrics::gauges::count_nvidia_pci(host.path()), 1);
}

/// On the real machine the driver check passed through NVML (`validator-driver_…`, the lead's run
/// of this validator there); the `nvidia-smi -q` fallback must report the same on the same GPU.
#[test]
fn the_nvidia_smi_fallback_reports_what_nvml_reported_on_the_real_gpu() {
    let log = fixture("validator-driver", "txt");
    let line = log
        .lines()
        .find(|l| l.contains("validated: "))
        .expect("the validated line");
    let (_, rest) = line.split_once("validated: ").unwrap();
    let (from_nvml, how) = rest.split_once(" (host driver").unwrap();
    assert!(how.contains("via NVML"), "{line}");
    let from_smi = smi::parse_query(Path::new("nvidia-smi"), &fixture("nvidia-smi-q", "txt"))
        .unwrap()
        .summary();
    assert_eq!(from_smi, from_nvml);
    assert_eq!(
        from_nvml,
        "driver 580.159.04, CUDA 13.0, 1 GPU (1x NVIDIA H100 80GB HBM3)"
    );
}
