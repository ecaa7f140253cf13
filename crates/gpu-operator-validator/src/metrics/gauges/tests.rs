//! Tests of the gauges' readings and exposition: status files in a temp dir, a fake sysfs, a
//! Node's capacity, and the exact names and `node` label of the text.

use std::fs;

use k8s_openapi::api::core::v1::Node;

use super::*;
use crate::testing::{node_with_capacity, pci_device};

#[test]
fn status_files_open_their_barriers() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(StatusFiles::read(dir.path()), StatusFiles::default());
    fs::write(dir.path().join("driver-ready"), "IS_HOST_DRIVER=true\n").unwrap();
    fs::write(dir.path().join("cuda-ready"), "").unwrap();
    fs::write(dir.path().join("workload-type"), "").unwrap();
    let files = StatusFiles::read(dir.path());
    assert_eq!(
        files,
        StatusFiles {
            driver: true,
            toolkit: false,
            plugin: false,
            cuda: true,
        }
    );
    assert_eq!(
        StatusFiles::read(&dir.path().join("absent")),
        StatusFiles::default()
    );
}

#[test]
fn counts_nvidia_pci_devices_in_sysfs() {
    let host = tempfile::tempdir().unwrap();
    assert_eq!(count_nvidia_pci(host.path()), -1, "no sysfs: unknown");
    pci_device(host.path(), "0000:18:00.0", "0x10de");
    pci_device(host.path(), "0000:2a:00.0", "0x10DE");
    pci_device(host.path(), "0000:00:1f.0", "0x8086");
    fs::create_dir_all(host.path().join(PCI_DEVICES_DIR).join("0000:00:00.0")).unwrap();
    assert_eq!(count_nvidia_pci(host.path()), 2);
}

#[test]
fn gpu_capacity_sums_whole_shared_and_mig_devices() {
    let node = node_with_capacity(&[
        ("cpu", "64"),
        ("nvidia.com/gpu", "8"),
        ("nvidia.com/mig-1g.10gb", "7"),
        ("nvidia.com/mig-2g.20gb", "0"),
        ("example.com/fpga", "2"),
    ]);
    assert_eq!(gpu_capacity(&node), 15);
    assert_eq!(
        gpu_capacity(&node_with_capacity(&[("nvidia.com/gpu.shared", "4")])),
        4
    );
    assert_eq!(gpu_capacity(&node_with_capacity(&[("cpu", "4")])), 0);
    assert_eq!(gpu_capacity(&Node::default()), 0);
}

#[test]
fn the_exposition_has_nvidias_names_and_the_node_label() {
    let gauges = Gauges {
        metrics_ready_ts: 1_700_000_000,
        status_files: StatusFiles {
            driver: true,
            toolkit: true,
            plugin: false,
            cuda: false,
        },
        driver_validation: true,
        driver_validation_last_success_ts: 1_700_000_030,
        device_plugin_devices: -1,
        device_plugin_validation_last_success_ts: 0,
        nvidia_pci_devices: 2,
        health: Health {
            healthy: 0,
            faults: vec![
                ("GPUXidError".into(), "XidRebootNode".into(), true),
                ("GPUMemoryError".into(), "NoMemoryErrors".into(), false),
            ],
        },
    };
    let text = render("gpu-node-1", &gauges);
    for line in [
        r#"gpu_operator_node_metrics_ready_ts_seconds{node="gpu-node-1"} 1700000000"#,
        r#"gpu_operator_node_driver_ready{node="gpu-node-1"} 1"#,
        r#"gpu_operator_node_toolkit_ready{node="gpu-node-1"} 1"#,
        r#"gpu_operator_node_plugin_ready{node="gpu-node-1"} 0"#,
        r#"gpu_operator_node_cuda_ready{node="gpu-node-1"} 0"#,
        r#"gpu_operator_node_driver_validation{node="gpu-node-1"} 1"#,
        r#"gpu_operator_node_driver_validation_last_success_ts_seconds{node="gpu-node-1"} 1700000030"#,
        r#"gpu_operator_node_device_plugin_devices_total{node="gpu-node-1"} -1"#,
        r#"gpu_operator_node_device_plugin_validation_last_success_ts_seconds{node="gpu-node-1"} 0"#,
        r#"gpu_operator_nvidia_pci_devices_total{node="gpu-node-1"} 2"#,
        "# TYPE gpu_operator_nvidia_pci_devices_total gauge",
        r#"gpu_operator_node_gpu_healthy{node="gpu-node-1"} 0"#,
        r#"gpu_operator_node_gpu_fault{node="gpu-node-1",condition="GPUXidError",reason="XidRebootNode"} 1"#,
        r#"gpu_operator_node_gpu_fault{node="gpu-node-1",condition="GPUMemoryError",reason="NoMemoryErrors"} 0"#,
    ] {
        assert!(text.lines().any(|l| l == line), "no `{line}` in\n{text}");
    }
    assert_eq!(text.lines().filter(|l| l.starts_with("# TYPE")).count(), 12);
    assert!(text.ends_with('\n'));
    assert!(
        render("a\"b\\c", &gauges).contains(r#"{node="a\"b\\c"}"#),
        "label values are escaped"
    );
}
