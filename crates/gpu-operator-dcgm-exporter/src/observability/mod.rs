//! GPU observability shipped with the exporter: the alert rules ([`alerts`]) and the Grafana
//! dashboards ([`dashboards`]), both built from metric names (the exporter's DCGM fields, our
//! operator's and node status exporter's `gpu_operator_*` gauges) with the thresholds of
//! `dcgmExporter.prometheusRule`. This module resolves those settings and their defaults once.
//!
//! Labels the expressions rely on: `node`, which the exporter's ServiceMonitor copies from the
//! scraped pod's node while alerts or dashboards are on (the node status exporter sets it
//! itself); `gpu`, `UUID`, `modelName`, `GPU_I_PROFILE`/`GPU_I_ID` (MIG) from the exporter; and
//! the pod and namespace of the workload using a GPU, which the exporter adds as `pod` and
//! `namespace` — renamed `exported_pod`/`exported_namespace` by Prometheus unless the
//! ServiceMonitor honours the exporter's labels (`serviceMonitor.honorLabels`).

pub mod alerts;
pub mod dashboards;
pub mod names;
pub mod promql;

use gpu_operator_api::spec::{AlertThresholds, DcgmExporterSpec};

/// Default page for runbook links; each alert links to `#<alert name, lowercased>`.
pub const RUNBOOK_URL: &str = "https://example.invalid/gpu-operator-rs/blob/main/docs/runbooks.md";
/// XIDs that page by default: 48 double-bit ECC, 63/64 row remapping, 74 NVLink, 79 fell off
/// the bus.
pub const CRITICAL_XIDS: [u32; 5] = [48, 63, 64, 74, 79];

/// The thresholds and label names the rules and dashboards are built with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// Label of the workload pod using a GPU.
    pub pod_label: &'static str,
    /// Label of the workload pod's namespace.
    pub namespace_label: &'static str,
    /// The runbook page.
    pub runbook_url: String,
    /// Alerts to leave out.
    pub disabled_alerts: Vec<String>,
    /// XIDs that page.
    pub critical_xids: Vec<u32>,
    /// °C.
    pub temperature_celsius: u32,
    /// Duration.
    pub temperature_for: String,
    /// Percent of time throttled.
    pub throttling_percent: u32,
    /// Percent utilisation under which an allocated GPU is idle.
    pub idle_utilization_percent: u32,
    /// Duration.
    pub idle_for: String,
    /// Duration.
    pub unallocated_for: String,
    /// Seconds ahead in which a leaking framebuffer would be full.
    pub memory_full_within_seconds: u64,
    /// Percent utilisation above which SMs count as busy.
    pub busy_utilization_percent: u32,
    /// Duration.
    pub nvlink_stalled_for: String,
    /// Duration.
    pub not_validated_for: String,
    /// Duration.
    pub upgrade_stuck_for: String,
    /// Duration.
    pub reconcile_failing_for: String,
    /// Whether the device plugin runs, so nodes must pass its validation too.
    pub device_plugin: bool,
}

impl Settings {
    /// The settings of `exporter`, defaults filled in; `device_plugin`: whether the device
    /// plugin is enabled.
    pub fn of(exporter: &DcgmExporterSpec, device_plugin: bool) -> Self {
        let honor = exporter
            .service_monitor
            .as_ref()
            .and_then(|m| m.honor_labels)
            .unwrap_or(false);
        let rule = exporter.prometheus_rule.clone().unwrap_or_default();
        let t = rule.thresholds.unwrap_or_default();
        let AlertThresholds {
            critical_xids,
            temperature_celsius,
            temperature_for,
            throttling_percent,
            idle_utilization_percent,
            idle_for,
            unallocated_for,
            memory_full_within,
            busy_utilization_percent,
            nvlink_stalled_for,
            not_validated_for,
            upgrade_stuck_for,
            reconcile_failing_for,
        } = t;
        let or = |value: Option<String>, default: &str| {
            value
                .filter(|v| seconds(v).is_some())
                .unwrap_or_else(|| default.to_owned())
        };
        Self {
            pod_label: if honor { "pod" } else { "exported_pod" },
            namespace_label: if honor {
                "namespace"
            } else {
                "exported_namespace"
            },
            runbook_url: rule
                .runbook_url
                .filter(|u| !u.is_empty())
                .unwrap_or_else(|| RUNBOOK_URL.to_owned()),
            disabled_alerts: rule.disabled_alerts.unwrap_or_default(),
            critical_xids: critical_xids
                .filter(|x| !x.is_empty())
                .unwrap_or_else(|| CRITICAL_XIDS.to_vec()),
            temperature_celsius: temperature_celsius.unwrap_or(85),
            temperature_for: or(temperature_for, "10m"),
            throttling_percent: throttling_percent.unwrap_or(10),
            idle_utilization_percent: idle_utilization_percent.unwrap_or(5),
            idle_for: or(idle_for, "30m"),
            unallocated_for: or(unallocated_for, "1h"),
            memory_full_within_seconds: memory_full_within
                .as_deref()
                .and_then(seconds)
                .unwrap_or(4 * 3600),
            busy_utilization_percent: busy_utilization_percent.unwrap_or(80),
            nvlink_stalled_for: or(nvlink_stalled_for, "10m"),
            not_validated_for: or(not_validated_for, "15m"),
            upgrade_stuck_for: or(upgrade_stuck_for, "1h"),
            reconcile_failing_for: or(reconcile_failing_for, "15m"),
            device_plugin,
        }
    }
}

/// Whole seconds of a Prometheus duration such as `1h30m` (`None` when it is not one, or
/// shorter than a second).
pub fn seconds(duration: &str) -> Option<u64> {
    let mut total: u64 = 0;
    let mut rest = duration;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit())?;
        let number: u64 = rest[..digits].parse().ok()?;
        let unit_end = rest[digits..]
            .find(|c: char| c.is_ascii_digit())
            .map_or(rest.len(), |i| digits + i);
        let scale = match &rest[digits..unit_end] {
            "ms" => 0,
            "s" => 1,
            "m" => 60,
            "h" => 3600,
            "d" => 86_400,
            "w" => 604_800,
            "y" => 31_536_000,
            _ => return None,
        };
        total = total.checked_add(number.checked_mul(scale)?)?;
        rest = &rest[unit_end..];
    }
    (total > 0).then_some(total)
}

#[cfg(test)]
mod tests {
    use gpu_operator_api::spec::{PrometheusRuleConfig, ServiceMonitorConfig};

    use super::*;

    #[test]
    fn durations_are_read_as_prometheus_writes_them() {
        assert_eq!(seconds("30m"), Some(1800));
        assert_eq!(seconds("1h30m"), Some(5400));
        assert_eq!(seconds("4h"), Some(14_400));
        assert_eq!(seconds("90s"), Some(90));
        for bad in ["", "10", "m", "5x", "0s"] {
            assert_eq!(seconds(bad), None, "{bad}");
        }
    }

    #[test]
    fn pod_labels_follow_honor_labels_and_thresholds_override_defaults() {
        let mut exporter = DcgmExporterSpec::default();
        let plain = Settings::of(&exporter, true);
        assert_eq!(
            (plain.pod_label, plain.namespace_label),
            ("exported_pod", "exported_namespace")
        );
        assert_eq!(plain.temperature_celsius, 85);
        assert_eq!(plain.critical_xids, vec![48, 63, 64, 74, 79]);
        exporter.service_monitor = Some(ServiceMonitorConfig {
            honor_labels: Some(true),
            ..ServiceMonitorConfig::default()
        });
        exporter.prometheus_rule = Some(PrometheusRuleConfig {
            thresholds: Some(AlertThresholds {
                temperature_celsius: Some(90),
                idle_for: Some("45m".into()),
                memory_full_within: Some("2h".into()),
                ..AlertThresholds::default()
            }),
            ..PrometheusRuleConfig::default()
        });
        let custom = Settings::of(&exporter, true);
        assert_eq!(
            (custom.pod_label, custom.namespace_label),
            ("pod", "namespace")
        );
        assert_eq!(custom.temperature_celsius, 90);
        assert_eq!(custom.idle_for, "45m");
        assert_eq!(custom.memory_full_within_seconds, 7200);
    }
}
