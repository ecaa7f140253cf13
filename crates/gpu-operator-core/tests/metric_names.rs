//! `docs/metrics.txt` (the names the shipped alerts and dashboards may read) against what the
//! operator's registry really exposes: every `operator` name is served, and every served
//! `gpu_operator_*` name is listed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use gpu_operator_core::report::metrics::{
    DriverRestart, DriverUpgrades, Metrics, ReconciliationStatus,
};

fn listed(source: &str) -> Vec<String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/metrics.txt");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once(' '))
        .filter(|(s, _)| *s == source)
        .map(|(_, name)| name.trim().to_owned())
        .collect()
}

/// Names of the samples in a text exposition.
fn exposed(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .collect()
}

#[test]
fn listed_operator_metrics_are_exposed_and_exposed_ones_are_listed() {
    let metrics = Metrics::new();
    metrics.set_policy_status(ReconciliationStatus::Ready, 1, false);
    metrics.observe("driver", Duration::from_millis(5), Some("ApiError"));
    metrics.set_driver_upgrades(&DriverUpgrades {
        by_state: vec![("upgrade-done", 1)],
        ..DriverUpgrades::default()
    });
    metrics.count_driver_restart(DriverRestart::InPlace);
    metrics.set_unhealthy_nodes(&std::collections::BTreeMap::from([(
        "DoubleBitECC".to_owned(),
        1,
    )]));
    let text = metrics.encode().unwrap();
    let names = exposed(&text);
    let operator = listed("operator");
    assert!(operator.len() >= 9, "the list has the operator's names");
    for name in &operator {
        assert!(
            names.contains(&name.as_str()),
            "{name} is not exposed:\n{text}"
        );
    }
    for name in names.iter().filter(|n| n.starts_with("gpu_operator_")) {
        assert!(
            operator.iter().any(|o| o == name),
            "{name} is exposed but not in docs/metrics.txt"
        );
    }
}
