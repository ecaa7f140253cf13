//! Fields NVIDIA has removed from the ClusterPolicy that CRs written for older releases still
//! carry. The CRD keeps them (nothing is pruned, `kubectl apply --validate=strict` passes); the
//! operator says once, as a warning of the operand each belongs to (its condition and one Warning
//! Event), that it is deprecated and what to use instead. Fields of no operand (`psp`,
//! `operator.*`) are reported by the validator, which always runs.

use gpu_operator_api::ClusterPolicySpec;

use crate::pipeline::operand::Warning;

/// Reason of the warnings.
pub const REASON: &str = "DeprecatedField";

/// One deprecated field a ClusterPolicy sets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deprecated {
    /// The operand section that reports it.
    pub reported_by: &'static str,
    /// The field, as written in the ClusterPolicy.
    pub field: &'static str,
    /// What happens to it and what to use instead.
    pub advice: &'static str,
}

/// The deprecated fields `spec` sets (an explicit value counts, even `false`).
pub fn in_spec(spec: &ClusterPolicySpec) -> Vec<Deprecated> {
    let entry = |reported_by, field, advice| Deprecated {
        reported_by,
        field,
        advice,
    };
    let mut found = Vec::new();
    if spec.psp.is_some() {
        found.push(entry(
            "validator",
            "spec.psp",
            "PodSecurityPolicies no longer exist in Kubernetes; ignored (use spec.psa)",
        ));
    }
    if spec.operator.init_container.is_some() {
        found.push(entry(
            "validator",
            "spec.operator.initContainer",
            "operand init containers run the validator image; ignored",
        ));
    }
    if spec.operator.default_runtime.is_some() {
        found.push(entry(
            "validator",
            "spec.operator.defaultRuntime",
            "the container runtime is detected on each node; ignored",
        ));
    }
    if spec.cdi.as_ref().is_some_and(|c| c.default.is_some()) {
        found.push(entry("toolkit", "spec.cdi.default", "ignored"));
    }
    if spec.dcgm.host_port.is_some() {
        found.push(entry(
            "dcgm",
            "spec.dcgm.hostPort",
            "DCGM is reached through the nvidia-dcgm Service; ignored",
        ));
    }
    if spec.driver.use_open_kernel_modules.is_some() {
        found.push(entry(
            "driver",
            "spec.driver.useOpenKernelModules",
            "use spec.driver.kernelModuleType (open, proprietary or auto)",
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
    fn nvidias_v23_fields_are_reported_by_their_operand() {
        // The fields of NVIDIA's v23.9.2 sample ClusterPolicy that later releases removed.
        let old = spec(&json!({
            "operator": {"defaultRuntime": "docker", "initContainer": {"repository": "nvcr.io/nvidia", "image": "cuda", "version": "12.3.2-base-ubi8"}},
            "psp": {"enabled": false},
            "cdi": {"enabled": false, "default": false},
            "dcgm": {"hostPort": 5555},
            "driver": {"useOpenKernelModules": false, "licensingConfig": {"configMapName": ""}},
        }));
        let fields: Vec<(&str, &str)> = in_spec(&old)
            .iter()
            .map(|d| (d.reported_by, d.field))
            .collect();
        assert_eq!(
            fields,
            [
                ("validator", "spec.psp"),
                ("validator", "spec.operator.initContainer"),
                ("validator", "spec.operator.defaultRuntime"),
                ("toolkit", "spec.cdi.default"),
                ("dcgm", "spec.dcgm.hostPort"),
                ("driver", "spec.driver.useOpenKernelModules"),
            ]
        );
        let driver = warnings("driver", &old);
        assert_eq!(driver.len(), 1);
        assert_eq!(driver[0].reason, REASON);
        assert!(driver[0].message.contains("kernelModuleType"), "{driver:?}");
        assert!(warnings("gfd", &old).is_empty());
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
