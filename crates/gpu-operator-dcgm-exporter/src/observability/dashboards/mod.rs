//! The Grafana dashboards, built from tables of panels: GPU fleet ([`fleet`]), GPU cost
//! ([`cost`]) and the operator ([`operator`]). Every panel queries the Prometheus data source
//! picked in the `datasource` variable; GPU dashboards filter by the `node` variable. The JSON is
//! Grafana's dashboard model (schema version 39), laid out on its 24-column grid.

mod cost;
mod fleet;
mod operator;

use serde_json::{Value, json};

use super::Settings;

/// How a panel shows its queries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A line graph over time.
    TimeSeries,
    /// One big number (the last value).
    Stat,
    /// A table of the current values.
    Table,
}

/// One panel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Panel {
    /// Title.
    pub title: &'static str,
    /// What it shows, in a sentence (the panel's description).
    pub help: &'static str,
    /// How.
    pub kind: Kind,
    /// Grafana unit id, such as `percent`, `watt`, `celsius`, `mbytes`.
    pub unit: &'static str,
    /// Queries: PromQL and legend format.
    pub targets: Vec<(String, &'static str)>,
}

/// One dashboard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dashboard {
    /// Stable uid (also the ConfigMap key's stem).
    pub uid: &'static str,
    /// Title.
    pub title: &'static str,
    /// Whether it has the `node` variable (read from this metric's `node` label).
    pub node_variable: Option<&'static str>,
    /// Panels in reading order.
    pub panels: Vec<Panel>,
}

/// The dashboards for `settings`.
pub fn dashboards(settings: &Settings) -> Vec<Dashboard> {
    vec![
        fleet::dashboard(settings),
        cost::dashboard(settings),
        operator::dashboard(),
    ]
}

impl Dashboard {
    /// Every PromQL expression of the panels.
    pub fn expressions(&self) -> Vec<&str> {
        self.panels
            .iter()
            .flat_map(|p| p.targets.iter().map(|(expr, _)| expr.as_str()))
            .collect()
    }

    /// Grafana's dashboard JSON.
    pub fn to_json(&self) -> Value {
        let mut panels = Vec::new();
        let (mut x, mut y, mut row_height) = (0, 0, 0);
        for (id, panel) in self.panels.iter().enumerate() {
            let (w, h) = match panel.kind {
                Kind::Stat => (6, 4),
                Kind::TimeSeries => (12, 8),
                Kind::Table => (24, 8),
            };
            if x + w > 24 {
                (x, y) = (0, y + row_height);
                row_height = 0;
            }
            panels.push(panel_json(panel, id + 1, (x, y, w, h)));
            x += w;
            row_height = row_height.max(h);
        }
        let mut variables = vec![json!({
            "name": "datasource",
            "label": "Data source",
            "type": "datasource",
            "query": "prometheus",
            "current": {},
            "hide": 0,
        })];
        if let Some(metric) = self.node_variable {
            variables.push(json!({
                "name": "node",
                "label": "Node",
                "type": "query",
                "datasource": datasource(),
                "query": {"query": format!("label_values({metric}, node)"), "refId": "node"},
                "definition": format!("label_values({metric}, node)"),
                "refresh": 2,
                "multi": true,
                "includeAll": true,
                "allValue": ".*",
                "current": {"text": "All", "value": "$__all"},
                "sort": 1,
                "hide": 0,
            }));
        }
        json!({
            "uid": self.uid,
            "title": self.title,
            "tags": ["gpu", "nvidia", "gpu-operator"],
            "editable": true,
            "schemaVersion": 39,
            "time": {"from": "now-6h", "to": "now"},
            "refresh": "1m",
            "timezone": "browser",
            "templating": {"list": variables},
            "panels": panels,
        })
    }
}

fn datasource() -> Value {
    json!({"type": "prometheus", "uid": "${datasource}"})
}

fn panel_json(panel: &Panel, id: usize, (x, y, w, h): (i32, i32, i32, i32)) -> Value {
    let targets: Vec<Value> = panel
        .targets
        .iter()
        .zip('A'..)
        .map(|((expr, legend), ref_id)| {
            json!({
                "datasource": datasource(),
                "expr": expr,
                "legendFormat": legend,
                "refId": ref_id.to_string(),
                "instant": panel.kind != Kind::TimeSeries,
                "range": panel.kind == Kind::TimeSeries,
                "format": if panel.kind == Kind::Table { "table" } else { "time_series" },
            })
        })
        .collect();
    let kind = match panel.kind {
        Kind::TimeSeries => "timeseries",
        Kind::Stat => "stat",
        Kind::Table => "table",
    };
    json!({
        "id": id,
        "type": kind,
        "title": panel.title,
        "description": panel.help,
        "datasource": datasource(),
        "gridPos": {"x": x, "y": y, "w": w, "h": h},
        "fieldConfig": {"defaults": {"unit": panel.unit}, "overrides": []},
        "options": {"legend": {"displayMode": "table", "placement": "right", "calcs": ["lastNotNull", "max"]}},
        "targets": targets,
    })
}

#[cfg(test)]
mod tests;
