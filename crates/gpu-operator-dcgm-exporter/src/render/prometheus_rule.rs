//! PrometheusRule `nvidia-gpu-alerts`, when `dcgmExporter.prometheusRule.enabled`: the alert
//! rules of [`crate::observability::alerts`] with the configured thresholds, labelled with
//! `prometheusRule.additionalLabels` so a Prometheus can select it. The pipeline writes it only
//! while the PrometheusRule CRD is installed and says so in the condition otherwise.

use gpu_operator_core::{
    build::prometheus_rule::{self, DynamicObject},
    contract::Operand as _,
};

use crate::{DcgmExporter, Input, NAME, observability::alerts};

/// Name of the PrometheusRule.
pub const RULE_NAME: &str = "nvidia-gpu-alerts";

/// The PrometheusRule, or `None` when it is not enabled.
pub fn build(input: &Input) -> Option<DynamicObject> {
    let labels = input.prometheus_rule.as_ref()?;
    Some(prometheus_rule::build(
        RULE_NAME,
        NAME,
        DcgmExporter::NAME,
        labels,
        alerts::rule_spec(&input.observability),
    ))
}
