//! The Grafana dashboard ConfigMaps, when `dcgmExporter.grafanaDashboards.enabled`: one per
//! dashboard of [`crate::observability::dashboards`] (`nvidia-gpu-dashboard-<name>`, key
//! `<uid>.json`), labelled for Grafana's dashboard sidecar (`grafana_dashboard: "1"` unless
//! `grafanaDashboards.labels` says otherwise) and annotated with `grafanaDashboards.annotations`.

use std::collections::BTreeMap;

use gpu_operator_core::{build::meta, contract::Operand as _};
use k8s_openapi::{api::core::v1::ConfigMap, apimachinery::pkg::apis::meta::v1::ObjectMeta};

use crate::{DcgmExporter, Input, NAME, observability::dashboards};

/// The label Grafana's sidecar looks for by default.
pub const SIDECAR_LABEL: (&str, &str) = ("grafana_dashboard", "1");

/// The dashboard ConfigMaps (none unless enabled).
pub fn build(input: &Input) -> Vec<ConfigMap> {
    let Some(config) = &input.dashboards else {
        return Vec::new();
    };
    let mut labels = meta::labels(NAME, DcgmExporter::NAME);
    match &config.labels {
        Some(extra) => labels.extend(extra.clone()),
        None => {
            labels.insert(SIDECAR_LABEL.0.to_owned(), SIDECAR_LABEL.1.to_owned());
        }
    }
    dashboards::dashboards(&input.observability)
        .iter()
        .map(|dashboard| {
            let short = dashboard.uid.trim_start_matches("gpu-operator-");
            ConfigMap {
                metadata: ObjectMeta {
                    name: Some(format!("nvidia-gpu-dashboard-{short}")),
                    labels: Some(labels.clone()),
                    annotations: config.annotations.clone().filter(|a| !a.is_empty()),
                    ..ObjectMeta::default()
                },
                data: Some(BTreeMap::from([(
                    format!("{}.json", dashboard.uid),
                    format!("{:#}", dashboard.to_json()),
                )])),
                ..ConfigMap::default()
            }
        })
        .collect()
}
