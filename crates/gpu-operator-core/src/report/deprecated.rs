//! Fields NVIDIA has removed from the ClusterPolicy that CRs written for older releases still
//! carry. The CRD keeps them (nothing is pruned, `kubectl apply --validate=strict` passes). The
//! operator warns about one (as a warning of the operand it belongs to: its condition and one
//! Warning Event) only when its value asks for something this operator does not do; a value that
//! changes nothing is silent, so the CRD's own default (`cdi.default: false`) and the defaults in
//! NVIDIA's values files never warn. The rule, field by field:
//!
//! | field | warned when | why the other values change nothing |
//! |---|---|---|
//! | `psp.enabled` | `true` | PodSecurityPolicies no longer exist; `false` asks for none |
//! | `cdi.default` | `true` | CDI is never the default runtime mode; `false` is what happens |
//! | `dcgm.hostPort` | set while DCGM is deployed | no DCGM pod, no port |
//! | `driver.useOpenKernelModules` | `true` | `false` never forced a module type |
//! | `driver.licensingConfig.configMapName` | not empty | still honoured: a nudge to `secretName` |
//! | `operator.defaultRuntime` | never | the runtime is detected on each node, as NVIDIA's did |
//! | `operator.initContainer` | never | operand init containers run the validator image |
//!
//! The chart's install notes list every deprecated values key that is set, whatever its value.

use gpu_operator_api::ClusterPolicySpec;

use crate::contract::Warning;

/// Reason of the warnings.
pub const REASON: &str = "DeprecatedField";

/// One deprecated field a ClusterPolicy sets to a value that changes behaviour.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deprecated {
    /// The operand section that reports it.
    pub reported_by: &'static str,
    /// The field, as written in the ClusterPolicy.
    pub field: &'static str,
    /// What happens to it and what to use instead.
    pub advice: &'static str,
}

/// The deprecated fields `spec` sets to a value this operator does not honour as asked (the table
/// in the module header).
pub fn in_spec(spec: &ClusterPolicySpec) -> Vec<Deprecated> {
    let entry = |reported_by, field, advice| Deprecated {
        reported_by,
        field,
        advice,
    };
    let mut found = Vec::new();
    if spec.psp.as_ref().and_then(|p| p.enabled) == Some(true) {
        found.push(entry(
            "validator",
            "spec.psp.enabled",
            "PodSecurityPolicies no longer exist in Kubernetes; ignored (use spec.psa)",
        ));
    }
    if spec.cdi.as_ref().and_then(|c| c.default) == Some(true) {
        found.push(entry(
            "toolkit",
            "spec.cdi.default",
            "CDI is never made the default runtime mode; ignored (spec.cdi.enabled turns CDI on)",
        ));
    }
    if spec.dcgm.host_port.is_some() && spec.dcgm.enabled != Some(false) {
        found.push(entry(
            "dcgm",
            "spec.dcgm.hostPort",
            "DCGM is reached through the nvidia-dcgm Service; no host port is opened",
        ));
    }
    if spec.driver.use_open_kernel_modules == Some(true) {
        found.push(entry(
            "driver",
            "spec.driver.useOpenKernelModules",
            "ignored; use spec.driver.kernelModuleType: open",
        ));
    }
    if spec
        .driver
        .licensing_config
        .as_ref()
        .and_then(|l| l.config_map_name.as_deref())
        .is_some_and(|n| !n.is_empty())
    {
        found.push(entry(
            "driver",
            "spec.driver.licensingConfig.configMapName",
            "still honoured; use spec.driver.licensingConfig.secretName",
        ));
    }
    found
}

/// The warnings operand `section` reports for `spec`.
pub fn warnings(section: &str, spec: &ClusterPolicySpec) -> Vec<Warning> {
    in_spec(spec)
        .into_iter()
        .filter(|d| d.reported_by == section)
        .map(|d| Warning {
            reason: REASON,
            message: format!(
                "{} is deprecated (NVIDIA removed it): {}",
                d.field, d.advice
            ),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// `sections` over the required ones of a minimal spec.
    fn spec(sections: &serde_json::Value) -> ClusterPolicySpec {
        let mut spec = json!({
            "operator": {}, "daemonsets": {}, "driver": {}, "toolkit": {}, "devicePlugin": {},
            "dcgmExporter": {}, "dcgm": {}, "nodeStatusExporter": {}, "gfd": {},
        });
        for (key, value) in sections.as_object().unwrap() {
            spec[key] = value.clone();
        }
        serde_json::from_value(spec).unwrap()
    }

    #[test]
    fn values_that_ask_for_what_this_operator_does_not_do_are_reported_by_their_operand() {
        let asking = spec(&json!({
            "operator": {"defaultRuntime": "crio", "initContainer": {"repository": "r", "image": "cuda", "version": "1"}},
            "psp": {"enabled": true},
            "cdi": {"enabled": false, "default": true},
            "dcgm": {"hostPort": 5555},
            "driver": {"useOpenKernelModules": true, "licensingConfig": {"configMapName": "licensing"}},
        }));
        let fields: Vec<(&str, &str)> = in_spec(&asking)
            .iter()
            .map(|d| (d.reported_by, d.field))
            .collect();
        assert_eq!(
            fields,
            [
                ("validator", "spec.psp.enabled"),
                ("toolkit", "spec.cdi.default"),
                ("dcgm", "spec.dcgm.hostPort"),
                ("driver", "spec.driver.useOpenKernelModules"),
                ("driver", "spec.driver.licensingConfig.configMapName"),
            ]
        );
        let driver = warnings("driver", &asking);
        assert_eq!(driver.len(), 2);
        assert_eq!(driver[0].reason, REASON);
        assert!(driver[0].message.contains("kernelModuleType"), "{driver:?}");
        assert!(warnings("gfd", &asking).is_empty());
    }

    #[test]
    fn nvidias_v23_defaults_and_the_crd_defaults_change_nothing_and_warn_nothing() {
        // The deprecated fields as NVIDIA's v23.9.2 values file sets them (a hand copy of
        // ../shared/fixtures/nvidia/values/v23.9.2.yaml), and the CRD's `cdi.default: false`.
        let v23 = spec(&json!({
            "operator": {"defaultRuntime": "docker", "initContainer": {"repository": "nvcr.io/nvidia", "image": "cuda", "version": "12.3.2-base-ubi8"}},
            "psp": {"enabled": false},
            "cdi": {"enabled": false, "default": false},
            "dcgm": {"enabled": false, "hostPort": 5555},
            "driver": {"useOpenKernelModules": false, "licensingConfig": {"configMapName": ""}},
        }));
        assert_eq!(in_spec(&v23), []);
        let crd_default = spec(&json!({"cdi": {"enabled": true, "default": false}}));
        assert_eq!(in_spec(&crd_default), []);
    }

    #[test]
    fn a_current_cluster_policy_has_none() {
        let current = spec(&json!({
            "operator": {"runtimeClass": "nvidia"},
            "cdi": {"enabled": true},
            "driver": {"kernelModuleType": "auto", "licensingConfig": {"secretName": "lic"}},
        }));
        assert!(in_spec(&current).is_empty());
    }
}
