//! What an operand reports without stopping its rollout: a [`Warning`] is appended to the
//! operand's condition (whose reason it becomes while the condition is `True`) and, unless it
//! says otherwise, published once as a Warning Event.

use crate::build::{prometheus_rule, service_monitor};

/// A problem that does not stop an operand's rollout: it is appended to the operand's condition
/// (whose reason it becomes while the condition is `True`) and, unless `publishes_event` says
/// otherwise, published as a Warning Event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    /// PascalCase reason, such as `ServiceMonitorCRDMissing`.
    pub reason: &'static str,
    /// What is wrong and how to fix it.
    pub message: String,
}

/// Reason of a ServiceMonitor the cluster cannot take (no Prometheus Operator CRDs).
const SERVICE_MONITOR_CRD_MISSING: &str = "ServiceMonitorCRDMissing";

impl Warning {
    /// Whether the warning is also published as a Warning Event. Not a missing ServiceMonitor
    /// CRD: `dcgmExporter.serviceMonitor.enabled` is on in NVIDIA's default values, so on a
    /// cluster without the Prometheus Operator every default install would draw a Warning Event
    /// nobody caused; the condition still says it (its reason and message).
    pub(crate) fn publishes_event(&self) -> bool {
        self.reason != SERVICE_MONITOR_CRD_MISSING
    }

    /// The operand renders a ServiceMonitor but the cluster has no ServiceMonitor CRD.
    pub(crate) fn service_monitor_crd_missing(section: &str) -> Self {
        Self {
            reason: SERVICE_MONITOR_CRD_MISSING,
            message: format!(
                "{section}.serviceMonitor.enabled is true but the ServiceMonitor CRD ({}) is not \
                 installed, so no ServiceMonitor was created: install the Prometheus Operator's \
                 CRDs or set {section}.serviceMonitor.enabled=false",
                service_monitor::CRD_NAME
            ),
        }
    }

    /// The operand renders a PrometheusRule but the cluster has no PrometheusRule CRD.
    pub(crate) fn prometheus_rule_crd_missing(section: &str) -> Self {
        Self {
            reason: "PrometheusRuleCRDMissing",
            message: format!(
                "{section}.prometheusRule.enabled is true but the PrometheusRule CRD ({}) is not \
                 installed, so no alert rules were created: install the Prometheus Operator's \
                 CRDs or set {section}.prometheusRule.enabled=false",
                prometheus_rule::CRD_NAME
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_service_monitor_crd_publishes_no_event_and_a_missing_rule_crd_does() {
        // The ServiceMonitor is on in NVIDIA's default values; the alert rules are opt-in.
        assert!(!Warning::service_monitor_crd_missing("dcgmExporter").publishes_event());
        assert!(Warning::prometheus_rule_crd_missing("dcgmExporter").publishes_event());
    }

    #[test]
    fn a_missing_rule_crd_names_the_crd_and_the_switch() {
        let warning = Warning::prometheus_rule_crd_missing("dcgmExporter");
        assert_eq!(warning.reason, "PrometheusRuleCRDMissing");
        for part in [
            "prometheusrules.monitoring.coreos.com",
            "dcgmExporter.prometheusRule.enabled=false",
        ] {
            assert!(warning.message.contains(part), "{}", warning.message);
        }
    }
}
