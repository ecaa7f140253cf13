//! Checks of the rules' shape that need no Prometheus: every alert documented in the runbook,
//! annotated, and named uniquely; thresholds and switches reach the expressions. Whether the
//! rules fire when they should is tested with promtool (`xtask`'s `monitoring` tests).

use std::collections::BTreeSet;

use gpu_operator_api::spec::{AlertThresholds, DcgmExporterSpec, PrometheusRuleConfig};

use super::*;

fn settings(config: PrometheusRuleConfig) -> Settings {
    let exporter = DcgmExporterSpec {
        prometheus_rule: Some(config),
        ..DcgmExporterSpec::default()
    };
    Settings::of(&exporter, true)
}

fn runbook() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/runbooks.md");
    std::fs::read_to_string(path).unwrap()
}

/// The alerts the issue asks for, by group: a hand-written table.
const EXPECTED: [(&str, &str); 20] = [
    ("gpu-hardware-health", "GPUCriticalXid"),
    ("gpu-hardware-health", "GPUXidError"),
    ("gpu-hardware-health", "GPUDoubleBitEccError"),
    ("gpu-hardware-health", "GPURowRemapFailure"),
    ("gpu-hardware-health", "GPUThermalThrottling"),
    ("gpu-hardware-health", "GPUPowerThrottling"),
    ("gpu-hardware-health", "GPUTemperatureHigh"),
    ("gpu-hardware-health", "GPUNVLinkErrors"),
    ("gpu-cost", "GPUAllocatedIdle"),
    ("gpu-cost", "GPUUnallocated"),
    ("gpu-workload", "GPUMemoryLeak"),
    ("gpu-workload", "GPUNVLinkStalled"),
    ("gpu-stack-health", "GPUNodeNotValidated"),
    ("gpu-stack-health", "GPUDevicePluginNoDevices"),
    ("gpu-stack-health", "GPUDriverUpgradeStuck"),
    ("gpu-stack-health", "GPUDriverUpgradeFailed"),
    ("gpu-stack-health", "GPUMIGReconfigurationFailed"),
    ("gpu-stack-health", "GPUMIGReconfigurationStuck"),
    ("gpu-stack-health", "GPUNodeUnhealthy"),
    ("gpu-stack-health", "GPUOperatorReconcileFailing"),
];

#[test]
fn every_alert_is_grouped_annotated_and_in_the_runbook() {
    let spec = rule_spec(&settings(PrometheusRuleConfig::default()));
    let runbook = runbook();
    let headings: BTreeSet<String> = runbook
        .lines()
        .filter_map(|l| l.strip_prefix("### "))
        .map(|h| h.trim().to_lowercase())
        .collect();
    let mut seen = Vec::new();
    for group in spec["groups"].as_array().unwrap() {
        for rule in group["rules"].as_array().unwrap() {
            let name = rule["alert"].as_str().unwrap();
            seen.push((group["name"].as_str().unwrap(), name));
            let notes = &rule["annotations"];
            assert!(!notes["summary"].as_str().unwrap().is_empty(), "{name}");
            let cluster_wide = [
                "GPUDriverUpgradeStuck",
                "GPUDriverUpgradeFailed",
                "GPUMIGReconfigurationFailed",
                "GPUMIGReconfigurationStuck",
                "GPUNodeUnhealthy",
                "GPUOperatorReconcileFailing",
            ];
            assert!(
                cluster_wide.contains(&name)
                    || notes["description"]
                        .as_str()
                        .unwrap()
                        .contains("$labels.node"),
                "{name}: the description names the node"
            );
            let url = notes["runbook_url"].as_str().unwrap();
            let anchor = url.rsplit_once('#').unwrap().1;
            assert!(
                url.starts_with(super::super::RUNBOOK_URL) && headings.contains(anchor),
                "{name}: {url} has no `### {name}` section in docs/runbooks.md"
            );
            assert!(
                ["critical", "warning", "info"]
                    .contains(&rule["labels"]["severity"].as_str().unwrap()),
                "{name}"
            );
        }
    }
    assert_eq!(seen, EXPECTED.to_vec());
}

#[test]
fn gpu_alerts_name_the_gpu_and_the_pod() {
    for alert in alerts(&settings(PrometheusRuleConfig::default())) {
        if matches!(alert.group, Group::Stack) {
            continue;
        }
        assert!(
            alert.description.contains("$labels.UUID")
                && alert.description.contains("$labels.exported_pod"),
            "{}: {}",
            alert.name,
            alert.description
        );
    }
}

#[test]
fn thresholds_disabled_alerts_and_the_runbook_url_are_applied() {
    let custom = settings(PrometheusRuleConfig {
        runbook_url: Some("https://wiki.example.com/gpu".into()),
        disabled_alerts: Some(vec!["GPUUnallocated".into()]),
        thresholds: Some(AlertThresholds {
            temperature_celsius: Some(91),
            temperature_for: Some("3m".into()),
            critical_xids: Some(vec![31]),
            ..AlertThresholds::default()
        }),
        ..PrometheusRuleConfig::default()
    });
    let all = alerts(&custom);
    let find = |name: &str| all.iter().find(|a| a.name == name);
    assert!(find("GPUUnallocated").is_none());
    let hot = find("GPUTemperatureHigh").unwrap();
    assert!(hot.expr.contains("> 91"), "{}", hot.expr);
    assert_eq!(hot.for_.as_deref(), Some("3m"));
    let xid = find("GPUCriticalXid").unwrap();
    assert!(xid.expr.contains("== 31") && !xid.expr.contains("48"));
    let spec = rule_spec(&custom);
    assert_eq!(
        spec["groups"][0]["rules"][0]["annotations"]["runbook_url"],
        "https://wiki.example.com/gpu#gpucriticalxid"
    );
}

#[test]
fn node_validation_waits_for_the_plugin_only_when_it_runs() {
    let exporter = DcgmExporterSpec::default();
    let expr = |plugin| {
        alerts(&Settings::of(&exporter, plugin))
            .into_iter()
            .find(|a| a.name == "GPUNodeNotValidated")
            .unwrap()
            .expr
    };
    assert!(expr(true).contains("gpu_operator_node_plugin_ready"));
    assert!(!expr(false).contains("gpu_operator_node_plugin_ready"));
}
