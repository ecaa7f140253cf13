//! Prometheus Operator settings: the ServiceMonitor options used by `operator.metrics` and
//! `dcgmExporter`.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Pattern of a Prometheus duration such as `30s`, `1m30s` or `0`.
const DURATION_PATTERN: &str =
    "^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$";

/// A Prometheus Operator ServiceMonitor for a metrics Service.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceMonitorConfig {
    /// Create the ServiceMonitor (only when the `servicemonitors.monitoring.coreos.com` CRD
    /// exists). Defaults to false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// How often Prometheus scrapes the metrics, as a Prometheus duration such as `15s`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = DURATION_PATTERN))]
    pub interval: Option<String>,
    /// How long a scrape may take before Prometheus gives up, such as `10s`; at most `interval`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = DURATION_PATTERN))]
    pub scrape_timeout: Option<String>,
    /// Keep the labels of the scraped metrics when they clash with the labels Prometheus adds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub honor_labels: Option<bool>,
    /// Extra labels on the ServiceMonitor, for example the label your Prometheus selects
    /// ServiceMonitors by.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additional_labels: Option<BTreeMap<String, String>>,
    /// Relabeling rules applied to the scraped targets before ingestion.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub relabelings: Option<Vec<RelabelConfig>>,
}

/// One Prometheus relabeling rule.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RelabelConfig {
    /// Labels whose values are joined with `separator` and matched against `regex`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_labels: Option<Vec<String>>,
    /// Separator placed between the joined source label values. Prometheus defaults to `;`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub separator: Option<String>,
    /// Label the result is written to. Required by the `replace`, `hashmod`, `lowercase` and
    /// `uppercase` actions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_label: Option<String>,
    /// Regular expression matched against the joined source values. Prometheus defaults to
    /// `(.*)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub regex: Option<String>,
    /// Modulus of the hash of the source values, for the `hashmod` action.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub modulus: Option<i64>,
    /// Value written by the `replace` action; may reference regex groups such as `$1`.
    /// Prometheus defaults to `$1`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replacement: Option<String>,
    /// What the rule does: `replace` (the default), `keep`, `drop`, `hashmod`, `labelmap`,
    /// `labeldrop`, `labelkeep`, `lowercase`, `uppercase`, `keepequal` or `dropequal`, in lower
    /// or capitalised spelling (`Replace`, `LabelMap`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "replace", "enum" = [
        "replace", "Replace", "keep", "Keep", "drop", "Drop", "hashmod", "HashMod",
        "labelmap", "LabelMap", "labeldrop", "LabelDrop", "labelkeep", "LabelKeep",
        "lowercase", "Lowercase", "uppercase", "Uppercase", "keepequal", "KeepEqual",
        "dropequal", "DropEqual"
    ]))]
    pub action: Option<String>,
}
