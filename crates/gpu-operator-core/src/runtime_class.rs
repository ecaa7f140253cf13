//! The container runtime of the GPU nodes and the RuntimeClass operand pods run with, by NVIDIA's
//! rules. The runtime is detected from the GPU nodes' `containerRuntimeVersion`: containerd if any
//! node runs it, else CRI-O, else Docker, else `operator.defaultRuntime`, else containerd. Operand
//! pods that use GPUs (device plugin, MPS control daemon, GFD, DCGM, DCGM exporter, MIG manager,
//! validator) run with `runtimeClassName: <operator.runtimeClass>` (default `nvidia`), except when
//! CDI is off on CRI-O (the toolkit installs an OCI hook instead of a runtime handler) or when the
//! NRI plugin injects GPUs. The driver and the toolkit never get it: they run before the NVIDIA
//! runtime exists.

use gpu_operator_api::ClusterPolicySpec;

use crate::facts::ClusterFacts;

/// Name of the RuntimeClass (and its handler) when `operator.runtimeClass` is unset.
pub const DEFAULT_RUNTIME_CLASS: &str = "nvidia";
/// RuntimeClass (and handler) that injects GPUs through CDI, created while CDI is enabled.
pub const CDI_RUNTIME_CLASS: &str = "nvidia-cdi";
/// RuntimeClass (and handler) of the legacy (non-CDI) NVIDIA runtime, created while CDI is
/// enabled.
pub const LEGACY_RUNTIME_CLASS: &str = "nvidia-legacy";

/// A container runtime the toolkit knows how to configure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ContainerRuntime {
    /// containerd.
    Containerd,
    /// CRI-O.
    CriO,
    /// Docker (through cri-dockerd).
    Docker,
}

impl ContainerRuntime {
    /// The toolkit's `RUNTIME` value: `containerd`, `crio` or `docker`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Containerd => "containerd",
            Self::CriO => "crio",
            Self::Docker => "docker",
        }
    }

    /// The runtime of a `containerRuntimeVersion` scheme (`containerd`, `cri-o`, `docker`) or of
    /// an `operator.defaultRuntime` value (`containerd`, `crio`, `docker`).
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "containerd" => Some(Self::Containerd),
            "cri-o" | "crio" => Some(Self::CriO),
            "docker" => Some(Self::Docker),
            _ => None,
        }
    }
}

/// The runtime the toolkit configures: containerd if any GPU node runs it, else CRI-O, else
/// Docker; with no known runtime, `operator.defaultRuntime`, else containerd.
pub fn detect(spec: &ClusterPolicySpec, facts: &ClusterFacts) -> ContainerRuntime {
    facts
        .runtimes
        .iter()
        .filter_map(|name| ContainerRuntime::from_name(name))
        .min()
        .or_else(|| {
            spec.operator
                .default_runtime
                .as_deref()
                .and_then(ContainerRuntime::from_name)
        })
        .unwrap_or(ContainerRuntime::Containerd)
}

/// `operator.runtimeClass`, or `nvidia` when it is unset or empty.
pub fn configured_name(spec: &ClusterPolicySpec) -> &str {
    spec.operator
        .runtime_class
        .as_deref()
        .filter(|name| !name.is_empty())
        .unwrap_or(DEFAULT_RUNTIME_CLASS)
}

/// Whether CDI is enabled (`cdi.enabled`, default true).
pub fn cdi_enabled(spec: &ClusterPolicySpec) -> bool {
    spec.cdi.as_ref().and_then(|c| c.enabled).unwrap_or(true)
}

/// Whether the toolkit's NRI plugin injects GPUs (`cdi.nriPluginEnabled`, default false).
pub fn nri_plugin_enabled(spec: &ClusterPolicySpec) -> bool {
    spec.cdi
        .as_ref()
        .and_then(|c| c.nri_plugin_enabled)
        .unwrap_or(false)
}

/// The `runtimeClassName` of GPU-using operand pods (see the module docs for who calls it), or
/// `None` when they must run without one.
pub fn runtime_class_name(spec: &ClusterPolicySpec, facts: &ClusterFacts) -> Option<String> {
    let runtime = detect(spec, facts);
    let hook_only = !cdi_enabled(spec) && runtime == ContainerRuntime::CriO;
    (!hook_only && !nri_plugin_enabled(spec)).then(|| configured_name(spec).to_owned())
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
    fn containerd_wins_over_crio_which_wins_over_docker() {
        let spec = ClusterPolicySpec::default();
        let detect = |r: &[&str]| detect(&spec, &facts(r));
        assert_eq!(
            detect(&["docker", "cri-o", "containerd"]),
            ContainerRuntime::Containerd
        );
        assert_eq!(detect(&["docker", "cri-o"]), ContainerRuntime::CriO);
        assert_eq!(detect(&["docker"]), ContainerRuntime::Docker);
        assert_eq!(detect(&["unknown"]), ContainerRuntime::Containerd);
    }

    #[test]
    fn default_runtime_is_the_fallback_when_no_node_tells() {
        let mut spec = ClusterPolicySpec::default();
        spec.operator.default_runtime = Some("crio".into());
        assert_eq!(detect(&spec, &facts(&[])), ContainerRuntime::CriO);
        assert_eq!(
            detect(&spec, &facts(&["docker"])),
            ContainerRuntime::Docker,
            "a detected runtime wins over the deprecated default"
        );
    }

    #[test]
    fn operand_pods_get_the_configured_class_except_crio_without_cdi_and_nri() {
        let mut spec = ClusterPolicySpec::default();
        assert_eq!(
            runtime_class_name(&spec, &facts(&["cri-o"])).as_deref(),
            Some("nvidia")
        );
        spec.operator.runtime_class = Some("nvidia-custom".into());
        assert_eq!(
            runtime_class_name(&spec, &facts(&["containerd"])).as_deref(),
            Some("nvidia-custom")
        );
        spec.cdi = Some(CdiSpec {
            enabled: Some(false),
            ..CdiSpec::default()
        });
        assert_eq!(runtime_class_name(&spec, &facts(&["cri-o"])), None);
        assert!(runtime_class_name(&spec, &facts(&["containerd"])).is_some());
        spec.cdi = Some(CdiSpec {
            nri_plugin_enabled: Some(true),
            ..CdiSpec::default()
        });
        assert_eq!(runtime_class_name(&spec, &facts(&["containerd"])), None);
    }
}
