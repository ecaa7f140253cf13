//! The alert rules, in four groups: GPU hardware health, GPU cost, workloads, and the health of
//! the GPU stack from our own metrics. Each alert carries a `severity` label and `summary`,
//! `description` (naming node, GPU and pod where the series has them) and `runbook_url`
//! annotations; the runbook page is `docs/runbooks.md`, one section per alert.

mod gpu;
mod stack;

use serde_json::{Map, Value, json};

use super::Settings;

/// The rule groups, in the order they are rendered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    /// XIDs, ECC, row remapping, throttling, temperature, NVLink errors.
    Hardware,
    /// GPUs paid for but not used.
    Cost,
    /// Symptoms of a misbehaving workload.
    Workload,
    /// The GPU stack on the nodes and the operator.
    Stack,
}

impl Group {
    /// Name of the rule group.
    pub fn name(self) -> &'static str {
        match self {
            Self::Hardware => "gpu-hardware-health",
            Self::Cost => "gpu-cost",
            Self::Workload => "gpu-workload",
            Self::Stack => "gpu-stack-health",
        }
    }
}

/// One alerting rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Alert {
    /// Alert name, also the runbook anchor (lowercased).
    pub name: &'static str,
    /// Its group.
    pub group: Group,
    /// `critical`, `warning` or `info`.
    pub severity: &'static str,
    /// The PromQL expression.
    pub expr: String,
    /// How long the expression must hold, if at all.
    pub for_: Option<String>,
    /// One line.
    pub summary: String,
    /// What happened where, as a Prometheus template.
    pub description: String,
}

/// Every alert the settings call for (disabled ones left out), grouped in render order.
pub fn alerts(settings: &Settings) -> Vec<Alert> {
    let mut all = gpu::hardware(settings);
    all.extend(gpu::cost(settings));
    all.extend(gpu::workload(settings));
    all.extend(stack::alerts(settings));
    all.retain(|a| !settings.disabled_alerts.iter().any(|d| d == a.name));
    all
}

/// The PrometheusRule `spec`: `{"groups": [...]}` with the alerts of each non-empty group.
pub fn rule_spec(settings: &Settings) -> Value {
    let all = alerts(settings);
    let groups: Vec<Value> = [Group::Hardware, Group::Cost, Group::Workload, Group::Stack]
        .into_iter()
        .filter_map(|group| {
            let rules: Vec<Value> = all
                .iter()
                .filter(|a| a.group == group)
                .map(|a| rule(a, &settings.runbook_url))
                .collect();
            (!rules.is_empty()).then(|| json!({"name": group.name(), "rules": rules}))
        })
        .collect();
    json!({ "groups": groups })
}

fn rule(alert: &Alert, runbook_url: &str) -> Value {
    let mut rule = Map::new();
    rule.insert("alert".into(), json!(alert.name));
    rule.insert("expr".into(), json!(alert.expr));
    if let Some(for_) = &alert.for_ {
        rule.insert("for".into(), json!(for_));
    }
    rule.insert("labels".into(), json!({"severity": alert.severity}));
    rule.insert(
        "annotations".into(),
        json!({
            "summary": alert.summary,
            "description": alert.description,
            "runbook_url": format!("{runbook_url}#{}", alert.name.to_lowercase()),
        }),
    );
    Value::Object(rule)
}

/// `GPU <index> (<model>, <UUID>) on node <node>`, as a template over the series' labels.
pub(crate) const GPU_ON_NODE: &str = "GPU {{ $labels.gpu }} ({{ $labels.modelName }}, {{ $labels.UUID }}) on node {{ $labels.node }}";

/// `, used by pod <namespace>/<pod>` when the series names one, else nothing.
pub(crate) fn used_by(settings: &Settings) -> String {
    format!(
        "{{{{ with $labels.{pod} }}}}, used by pod {{{{ $labels.{ns} }}}}/{{{{ . }}}}{{{{ end }}}}",
        pod = settings.pod_label,
        ns = settings.namespace_label
    )
}

#[cfg(test)]
mod tests;
