//! `docs/metrics.txt` (the names the shipped alerts and dashboards may read) against the node
//! status exporter's exposition: exactly the `node-status` names, each with its `node` label (the health
//! agent's fault gauge with one fault).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use gpu_operator_validator::metrics::gauges::{Gauges, Health, render};

#[test]
fn listed_node_status_metrics_are_exactly_the_exposed_ones() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/metrics.txt");
    let list = std::fs::read_to_string(path).unwrap();
    let mut listed: Vec<&str> = list
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once(' '))
        .filter(|(s, _)| *s == "node-status")
        .map(|(_, name)| name.trim())
        .collect();
    let gauges = Gauges {
        health: Health {
            healthy: 1,
            faults: vec![("GPUXidError".into(), "NoXidErrors".into(), false)],
        },
        ..Gauges::default()
    };
    let text = render("gpu-node-1", &gauges);
    let mut exposed: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once("{node=\"gpu-node-1\"").map(|(name, _)| name))
        .collect();
    listed.sort_unstable();
    exposed.sort_unstable();
    assert_eq!(listed, exposed);
    assert_eq!(exposed.len(), 12);
}
