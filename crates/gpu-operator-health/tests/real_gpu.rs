//! The outputs captured on a real H100 (`tests/fixtures`, see its README) agree with the agent's
//! classification: every query answered (or is unsupported on that GPU), the healthy GPU was
//! reported healthy, and the XID the kernel logged for the planted fault is the one NVML
//! delivered, classified as the application's.

#![allow(clippy::unwrap_used, reason = "test helpers")]

use std::path::Path;

use gpu_operator_health::catalog;

const SUFFIX: &str = "h100-80gb-hbm3_580.159.04.txt";

fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(format!("{name}_{SUFFIX}"));
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn every_query_answered_and_the_healthy_gpu_is_healthy() {
    let text = fixture("health-once");
    let gpu_lines: Vec<&str> = text.lines().filter(|l| l.starts_with("gpu 0 ")).collect();
    assert_eq!(gpu_lines.len(), 5, "five polls");
    for line in &gpu_lines {
        assert!(line.contains("uuid=\"GPU-"), "{line}");
        // Only retired pages are unsupported: the H100 remaps rows instead.
        let unreadable: Vec<&str> = line.matches("unreadable (").collect();
        assert_eq!(unreadable.len(), 1, "{line}");
        assert!(line.contains("retired_pages_pending=unreadable (nvmlDeviceGetRetiredPagesPendingStatus: NotSupported)"));
    }
    assert_eq!(text.matches("condition GPUHealthy=True").count(), 5);
    assert_eq!(text.matches("xid events: watched").count(), 5);
}

#[test]
fn the_planted_fault_is_the_xid_nvml_delivered_and_the_applications() {
    let log = fixture("xid-trigger");
    let kernel_xid: u64 = log
        .lines()
        .find_map(|l| l.split("NVRM: Xid (").nth(1))
        .and_then(|rest| rest.split("): ").nth(1))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap();
    let agent = fixture("health-xid");
    assert!(
        agent.contains(&format!("xid: {kernel_xid} }}")),
        "the agent saw XID {kernel_xid}"
    );
    let entry = catalog::lookup(kernel_xid).unwrap();
    assert!(!entry.bucket().is_node_fault(), "{entry}");
    assert!(
        agent.contains(&entry.to_string()),
        "the agent logged the catalog's row"
    );
    assert!(!agent.contains("GPUHealthy=False") && !agent.contains("GPUXidError=True"));
}
