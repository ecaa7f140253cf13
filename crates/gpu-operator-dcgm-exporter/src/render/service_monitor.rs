//! ServiceMonitor `nvidia-dcgm-exporter` (`nvidia-dcgm-exporter-dra` for a GPUCluster), when
//! `dcgmExporter.serviceMonitor.enabled`: scrapes `gpu-metrics` at `/metrics` of the exporter's
//! Service, with the interval, timeout, label handling, relabelings and extra labels of
//! `dcgmExporter.serviceMonitor`. While the shipped alerts or dashboards are on, a last
//! relabeling copies the scraped pod's node into label `node`, which they group and filter by.
//! The pipeline writes it only while the ServiceMonitor CRD is installed and warns otherwise.

use gpu_operator_core::build::service_monitor::{self, DynamicObject};
use serde_json::{Map, Value, json};

use crate::{Input, render::service::PORT_NAME};

/// The ServiceMonitor, or `None` when it is not enabled.
pub fn build(input: &Input) -> Option<DynamicObject> {
    let config = input.service_monitor.as_ref()?;
    let mut endpoint = Map::new();
    endpoint.insert("port".to_owned(), json!(PORT_NAME));
    endpoint.insert("path".to_owned(), json!("/metrics"));
    if let Some(interval) = config.interval.as_ref().filter(|i| !i.is_empty()) {
        endpoint.insert("interval".to_owned(), json!(interval));
    }
    if let Some(timeout) = config.scrape_timeout.as_ref().filter(|t| !t.is_empty()) {
        endpoint.insert("scrapeTimeout".to_owned(), json!(timeout));
    }
    if let Some(honor) = config.honor_labels {
        endpoint.insert("honorLabels".to_owned(), json!(honor));
    }
    let mut relabelings = match &config.relabelings {
        Some(relabelings) => json!(relabelings),
        None => json!([]),
    };
    if input.observability_enabled()
        && let Value::Array(items) = &mut relabelings
    {
        items.push(json!({
            "sourceLabels": ["__meta_kubernetes_pod_node_name"],
            "targetLabel": "node",
        }));
    }
    if relabelings.as_array().is_some_and(|r| !r.is_empty()) || config.relabelings.is_some() {
        endpoint.insert("relabelings".to_owned(), relabelings);
    }
    let name = input.form.name();
    let spec = json!({
        "endpoints": [Value::Object(endpoint)],
        "jobLabel": "app",
        "namespaceSelector": {"matchNames": [input.namespace]},
        "selector": {"matchLabels": {"app": name}},
    });
    Some(service_monitor::build(
        name,
        name,
        input.form.component(),
        &config.additional_labels.clone().unwrap_or_default(),
        spec,
    ))
}

#[cfg(test)]
mod tests {
    use gpu_operator_api::{
        ClusterPolicySpec,
        spec::{GrafanaDashboardsConfig, PrometheusRuleConfig, ServiceMonitorConfig},
    };
    use gpu_operator_core::fixtures::with_cluster;

    use super::*;

    fn endpoint(spec: &ClusterPolicySpec) -> Value {
        let input = with_cluster(&|_| Some("x/y:1".to_owned()), |cluster| {
            crate::validate::validate(spec, cluster)
        })
        .unwrap()
        .unwrap();
        let monitor = serde_json::to_value(build(&input).unwrap()).unwrap();
        monitor["spec"]["endpoints"][0].clone()
    }

    #[test]
    fn the_node_label_is_added_only_for_the_shipped_alerts_and_dashboards() {
        let mut spec = ClusterPolicySpec::default();
        spec.dcgm_exporter.service_monitor = Some(ServiceMonitorConfig {
            enabled: Some(true),
            ..ServiceMonitorConfig::default()
        });
        assert_eq!(endpoint(&spec).get("relabelings"), None);
        let node = json!({
            "sourceLabels": ["__meta_kubernetes_pod_node_name"],
            "targetLabel": "node",
        });
        spec.dcgm_exporter.prometheus_rule = Some(PrometheusRuleConfig {
            enabled: Some(true),
            ..PrometheusRuleConfig::default()
        });
        assert_eq!(endpoint(&spec)["relabelings"], json!([node]));
        spec.dcgm_exporter.prometheus_rule = None;
        spec.dcgm_exporter.grafana_dashboards = Some(GrafanaDashboardsConfig {
            enabled: Some(true),
            ..GrafanaDashboardsConfig::default()
        });
        assert_eq!(endpoint(&spec)["relabelings"], json!([node]));
    }
}
