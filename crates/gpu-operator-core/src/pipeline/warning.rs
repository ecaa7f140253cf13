//! How an operand's [`Warning`]s reach its condition: appended to the message, the first one the
//! reason while the condition is `True` ([`with_warnings`]). Their Events are published by
//! [`crate::pipeline::operand`].

use crate::{contract::Warning, pipeline::status_write::Desired};

/// `desired` with `warnings` appended to its message; the first becomes the reason of a `True`
/// condition.
pub(crate) fn with_warnings(mut desired: Desired, warnings: &[Warning]) -> Desired {
    if let Some(first) = warnings.first()
        && desired.status
    {
        first.reason.clone_into(&mut desired.reason);
    }
    for warning in warnings {
        desired.message.push_str("; ");
        desired.message.push_str(&warning.message);
    }
    desired
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_keep_the_status_and_name_the_problem() {
        let warning = Warning::service_monitor_crd_missing("dcgmExporter");
        let ready = with_warnings(
            Desired::ok("X", "Ready", "ready on 2/2 GPU nodes"),
            std::slice::from_ref(&warning),
        );
        assert!(ready.status);
        assert_eq!(ready.reason, "ServiceMonitorCRDMissing");
        assert!(
            ready
                .message
                .starts_with("ready on 2/2 GPU nodes; dcgmExporter.serviceMonitor")
                && ready
                    .message
                    .contains("servicemonitors.monitoring.coreos.com"),
            "{}",
            ready.message
        );
        let rolling = with_warnings(Desired::not_ok("X", "NotReady", "rolling out"), &[warning]);
        assert_eq!(
            rolling.reason, "NotReady",
            "a False condition keeps its reason"
        );
        let plain = Desired::ok("X", "Ready", "fine");
        assert_eq!(with_warnings(plain.clone(), &[]), plain);
    }
}
