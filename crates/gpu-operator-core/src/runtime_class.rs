//! `runtimeClassName` of the operand pods that use GPUs (DCGM, the DCGM exporter, the MIG manager,
//! …), by NVIDIA's rule: `operator.runtimeClass` (default `nvidia`), except with the NRI plugin,
//! and with CDI off on CRI-O (where the toolkit installs an OCI hook instead of a runtime).

use gpu_operator_api::ClusterPolicySpec;

use crate::facts::ClusterFacts;

/// The runtime class name when `operator.runtimeClass` is unset.
pub const DEFAULT: &str = "nvidia";

/// The container runtime the toolkit configures: containerd if any GPU node runs it, else CRI-O,
/// else Docker; containerd when nothing is known.
pub fn detected_runtime(facts: &ClusterFacts) -> &'static str {
    ["containerd", "cri-o", "docker"]
        .into_iter()
        .find(|r| facts.runtimes.contains(*r))
        .unwrap_or("containerd")
}

/// The `runtimeClassName` of operand pods, or `None` where NVIDIA sets none.
pub fn for_operand_pods(spec: &ClusterPolicySpec, facts: &ClusterFacts) -> Option<String> {
    let cdi = spec.cdi.as_ref();
    if cdi.and_then(|c| c.nri_plugin_enabled) == Some(true) {
        return None;
    }
    let cdi_enabled = cdi.and_then(|c| c.enabled).unwrap_or(true);
    if !cdi_enabled && detected_runtime(facts) == "cri-o" {
        return None;
    }
    Some(
        spec.operator
            .runtime_class
            .clone()
            .filter(|name| !name.is_empty())
            .unwrap_or_else(|| DEFAULT.to_owned()),
    )
}

#[cfg(test)]
mod tests {
    use gpu_operator_api::spec::CdiSpec;

    use super::*;

    fn facts(runtimes: &[&str]) -> ClusterFacts {
        ClusterFacts {
            runtimes: runtimes.iter().map(|r| (*r).to_owned()).collect(),
            ..ClusterFacts::default()
        }
    }

    #[test]
    fn operand_pods_get_the_runtime_class_except_with_nri_or_cri_o_without_cdi() {
        let mut spec = ClusterPolicySpec::default();
        assert_eq!(
            for_operand_pods(&spec, &facts(&["cri-o"])).as_deref(),
            Some("nvidia")
        );
        spec.operator.runtime_class = Some("nvidia-x".into());
        assert_eq!(
            for_operand_pods(&spec, &facts(&[])).as_deref(),
            Some("nvidia-x")
        );
        spec.cdi = Some(CdiSpec {
            enabled: Some(false),
            ..CdiSpec::default()
        });
        assert_eq!(for_operand_pods(&spec, &facts(&["cri-o"])), None);
        assert_eq!(
            for_operand_pods(&spec, &facts(&["cri-o", "containerd"])).as_deref(),
            Some("nvidia-x"),
            "containerd wins"
        );
        spec.cdi = Some(CdiSpec {
            nri_plugin_enabled: Some(true),
            ..CdiSpec::default()
        });
        assert_eq!(for_operand_pods(&spec, &facts(&["containerd"])), None);
    }
}
