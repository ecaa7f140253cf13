//! GPU observability shipped with the DCGM exporter: the alert rules (a Prometheus Operator
//! `PrometheusRule`) with their thresholds, and the Grafana dashboards (ConfigMaps for Grafana's
//! dashboard sidecar). Defaults are documented here and applied by the DCGM exporter operand.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Pattern of a non-empty Prometheus duration such as `30s`, `15m` or `1h30m`.
const FOR_PATTERN: &str = "^([0-9]+(ms|s|m|h|d|w|y))+$";

/// The `PrometheusRule` `nvidia-gpu-alerts` next to the exporter's ServiceMonitor: hardware
/// health, cost, workload and stack-health alerts, each with a runbook link.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PrometheusRuleConfig {
    /// Create the PrometheusRule (only while the `prometheusrules.monitoring.coreos.com` CRD
    /// exists; otherwise the `DCGMExporterReady` condition says so). Defaults to false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Extra labels on the PrometheusRule, for example the label your Prometheus selects rules
    /// by (`release: prometheus`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additional_labels: Option<BTreeMap<String, String>>,
    /// Where the runbook page is; each alert's `runbook_url` is this plus `#<alert anchor>`.
    /// Defaults to the project's `docs/runbooks.md`.
    #[serde(rename = "runbookURL", skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = "^https?://[^#\\s]+$"))]
    pub runbook_url: Option<String>,
    /// Alerts to leave out, by name (such as `GPUUnallocated`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disabled_alerts: Option<Vec<String>>,
    /// Thresholds and durations of the alerts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thresholds: Option<AlertThresholds>,
}

/// Thresholds and durations of the alerts; every one is optional and has a default.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AlertThresholds {
    /// XIDs that page (`GPUCriticalXid`); any other XID warns. Defaults to 48 (double-bit ECC),
    /// 63 and 64 (row remapping), 74 (NVLink) and 79 (fell off the bus).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1), inner(range(min = 1, max = 999)))]
    pub critical_xids: Option<Vec<u32>>,
    /// GPU temperature in °C above which `GPUTemperatureHigh` fires. Defaults to 85.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 30, max = 120))]
    pub temperature_celsius: Option<u32>,
    /// How long the temperature must stay above the threshold. Defaults to `10m`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = FOR_PATTERN))]
    pub temperature_for: Option<String>,
    /// Share of time (percent) a GPU may be held back by thermal or power limits before
    /// `GPUThermalThrottling`/`GPUPowerThrottling` fire. Defaults to 10.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub throttling_percent: Option<u32>,
    /// GPU utilisation (percent) below which a GPU allocated to a pod counts as idle. Defaults
    /// to 5.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub idle_utilization_percent: Option<u32>,
    /// How long an allocated GPU must stay idle before `GPUAllocatedIdle`. Defaults to `30m`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = FOR_PATTERN))]
    pub idle_for: Option<String>,
    /// How long a GPU must stay unallocated before `GPUUnallocated`. Defaults to `1h`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = FOR_PATTERN))]
    pub unallocated_for: Option<String>,
    /// `GPUMemoryLeak` fires when framebuffer use has grown for an hour and, at that rate,
    /// fills the framebuffer within this horizon. Defaults to `4h`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = FOR_PATTERN))]
    pub memory_full_within: Option<String>,
    /// GPU utilisation (percent) above which the SMs count as busy for `GPUNVLinkStalled`.
    /// Defaults to 80.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub busy_utilization_percent: Option<u32>,
    /// How long NVLink traffic must stay at zero on a busy GPU that had traffic before.
    /// Defaults to `10m`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = FOR_PATTERN))]
    pub nvlink_stalled_for: Option<String>,
    /// How long a GPU node's stack may stay unvalidated before `GPUNodeNotValidated`.
    /// Defaults to `15m`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = FOR_PATTERN))]
    pub not_validated_for: Option<String>,
    /// How long a driver upgrade may go without a node finishing before
    /// `GPUDriverUpgradeStuck`. Defaults to `1h`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = FOR_PATTERN))]
    pub upgrade_stuck_for: Option<String>,
    /// How long a reconciler may keep failing before `GPUOperatorReconcileFailing`. Defaults
    /// to `15m`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = FOR_PATTERN))]
    pub reconcile_failing_for: Option<String>,
}

/// Grafana dashboards as ConfigMaps in the operator namespace, labelled for Grafana's dashboard
/// sidecar: GPU fleet, GPU cost and the operator.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GrafanaDashboardsConfig {
    /// Create the dashboard ConfigMaps. Defaults to false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Labels the sidecar finds the ConfigMaps by. Defaults to `grafana_dashboard: "1"`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    /// Annotations on the ConfigMaps, such as the sidecar's folder annotation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}
