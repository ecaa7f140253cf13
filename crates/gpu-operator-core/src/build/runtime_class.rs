//! The container runtime of the GPU nodes and the RuntimeClass operand pods run with, by NVIDIA's
//! rules. The runtime is detected from the GPU nodes' `containerRuntimeVersion`: containerd if any
//! node runs it, else CRI-O, else Docker, else `operator.defaultRuntime`, else containerd. Operand
//! pods that use GPUs (device plugin, MPS control daemon, GFD, DCGM, DCGM exporter, MIG manager,
//! validator) run with `runtimeClassName: <operator.runtimeClass>` (default `nvidia`), except when
//! CDI is off on CRI-O (the toolkit installs an OCI hook instead of a runtime handler) or when the
//! NRI plugin injects GPUs (the pods then ask it for the management CDI device by annotation): see
//! [`GpuAccess`]. The driver and the toolkit never get it: they run before the NVIDIA
//! runtime exists.

use std::collections::BTreeSet;

use gpu_operator_api::ClusterPolicySpec;
use k8s_openapi::api::apps::v1::DaemonSet;

use crate::{
    build::daemonset,
    cache::facts::{ClusterFacts, OsRelease},
};

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
    detect_among(spec, &facts.runtimes)
}

/// The runtime of the GPU nodes of one OS, by the same rules as [`detect`] but among that OS's
/// nodes only: a driver DaemonSet's pod template must not change when nodes of another OS come
/// or go (its pods are replaced only when deleted).
pub fn detect_for_os(
    spec: &ClusterPolicySpec,
    facts: &ClusterFacts,
    os: &OsRelease,
) -> ContainerRuntime {
    facts.os_runtimes.get(os).map_or_else(
        || detect_among(spec, &BTreeSet::new()),
        |names| detect_among(spec, names),
    )
}

fn detect_among(spec: &ClusterPolicySpec, names: &BTreeSet<String>) -> ContainerRuntime {
    names
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

/// `NVIDIA_CDI_HOOK_PATH` of the operands that create CDI devices (device plugin, MIG manager):
/// the hook the toolkit installs under `toolkit.installDir`, when CDI is enabled and the operator
/// deploys the toolkit; `None` otherwise.
pub fn cdi_hook_path(spec: &ClusterPolicySpec) -> Option<String> {
    (cdi_enabled(spec) && spec.toolkit_enabled()).then(|| {
        format!(
            "{}/toolkit/nvidia-cdi-hook",
            spec.toolkit.install_dir().trim_end_matches('/')
        )
    })
}

/// Whether the toolkit's NRI plugin injects GPUs (`cdi.nriPluginEnabled`, default false).
pub fn nri_plugin_enabled(spec: &ClusterPolicySpec) -> bool {
    spec.cdi
        .as_ref()
        .and_then(|c| c.nri_plugin_enabled)
        .unwrap_or(false)
}

/// Annotation domain under which the toolkit's NRI plugin reads CDI device requests.
pub const NRI_ANNOTATION_DOMAIN: &str = "nvidia.cdi.k8s.io";
/// The CDI device that gives a container management access to every GPU of its node.
pub const MANAGEMENT_CDI_DEVICE: &str = "management.nvidia.com/gpu=all";

/// How a GPU-using operand pod reaches the GPUs (see the module docs for which pods).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GpuAccess {
    /// `runtimeClassName: <name>`: the NVIDIA runtime handler injects the GPUs.
    RuntimeClass(String),
    /// The NRI plugin injects the management CDI device into the container that needs the GPUs,
    /// asked for by the pod annotation `nvidia.cdi.k8s.io/container.<container>`.
    NriAnnotation,
    /// Nothing on the pod: CRI-O without CDI, whose OCI hook injects GPUs into every container.
    OciHook,
}

impl GpuAccess {
    /// The access NVIDIA's rules give operand pods for `spec` on these GPU nodes.
    pub fn of(spec: &ClusterPolicySpec, facts: &ClusterFacts) -> Self {
        if nri_plugin_enabled(spec) {
            Self::NriAnnotation
        } else if !cdi_enabled(spec) && detect(spec, facts) == ContainerRuntime::CriO {
            Self::OciHook
        } else {
            Self::RuntimeClass(configured_name(spec).to_owned())
        }
    }

    /// The RuntimeClass pods run with, if any (also what the validator gives its workload
    /// pods).
    pub fn runtime_class(&self) -> Option<&str> {
        match self {
            Self::RuntimeClass(name) => Some(name),
            Self::NriAnnotation | Self::OciHook => None,
        }
    }

    /// Gives the pods of `daemonset` this access; `container` is the one that needs the GPUs
    /// (the main container, or the validator's `toolkit-validation`).
    pub fn grant(&self, daemonset: &mut DaemonSet, container: &str) {
        match self {
            Self::RuntimeClass(name) => {
                if let Some(pod) = daemonset
                    .spec
                    .as_mut()
                    .and_then(|spec| spec.template.spec.as_mut())
                {
                    pod.runtime_class_name = Some(name.clone());
                }
            }
            Self::NriAnnotation => daemonset::annotate_pods(
                daemonset,
                format!("{NRI_ANNOTATION_DOMAIN}/container.{container}"),
                MANAGEMENT_CDI_DEVICE.to_owned(),
            ),
            Self::OciHook => {}
        }
    }
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
    fn the_cdi_hook_lives_under_the_toolkit_install_dir_when_cdi_and_the_toolkit_are_on() {
        let mut spec = ClusterPolicySpec::default();
        assert_eq!(
            cdi_hook_path(&spec).as_deref(),
            Some("/usr/local/nvidia/toolkit/nvidia-cdi-hook")
        );
        spec.toolkit.install_dir = Some(String::new());
        assert_eq!(
            cdi_hook_path(&spec).as_deref(),
            Some("/usr/local/nvidia/toolkit/nvidia-cdi-hook")
        );
        spec.toolkit.install_dir = Some("/opt/nvidia/".into());
        assert_eq!(
            cdi_hook_path(&spec).as_deref(),
            Some("/opt/nvidia/toolkit/nvidia-cdi-hook")
        );
        spec.toolkit.enabled = Some(false);
        assert_eq!(cdi_hook_path(&spec), None);
        spec.toolkit.enabled = None;
        spec.cdi = Some(gpu_operator_api::spec::CdiSpec {
            enabled: Some(false),
            ..Default::default()
        });
        assert_eq!(cdi_hook_path(&spec), None);
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
        let access =
            |spec: &ClusterPolicySpec, runtime: &str| GpuAccess::of(spec, &facts(&[runtime]));
        assert_eq!(
            access(&spec, "cri-o"),
            GpuAccess::RuntimeClass("nvidia".into())
        );
        spec.operator.runtime_class = Some("nvidia-custom".into());
        assert_eq!(
            access(&spec, "containerd").runtime_class(),
            Some("nvidia-custom")
        );
        spec.cdi = Some(CdiSpec {
            enabled: Some(false),
            ..CdiSpec::default()
        });
        assert_eq!(access(&spec, "cri-o"), GpuAccess::OciHook);
        assert!(access(&spec, "containerd").runtime_class().is_some());
        spec.cdi = Some(CdiSpec {
            nri_plugin_enabled: Some(true),
            ..CdiSpec::default()
        });
        assert_eq!(access(&spec, "containerd"), GpuAccess::NriAnnotation);
    }

    fn daemonset(containers: &[&str]) -> DaemonSet {
        use k8s_openapi::api::{
            apps::v1::DaemonSetSpec,
            core::v1::{Container, PodSpec, PodTemplateSpec},
        };
        DaemonSet {
            spec: Some(DaemonSetSpec {
                template: PodTemplateSpec {
                    metadata: None,
                    spec: Some(PodSpec {
                        containers: containers
                            .iter()
                            .map(|name| Container {
                                name: (*name).to_owned(),
                                ..Container::default()
                            })
                            .collect(),
                        ..PodSpec::default()
                    }),
                },
                ..DaemonSetSpec::default()
            }),
            ..DaemonSet::default()
        }
    }

    #[test]
    fn the_nri_plugin_is_asked_for_the_management_device_of_the_named_container() {
        let mut ds = daemonset(&["nvidia-device-plugin", "config-manager"]);
        GpuAccess::NriAnnotation.grant(&mut ds, "nvidia-device-plugin");
        let template = &ds.spec.as_ref().unwrap().template;
        assert_eq!(template.spec.as_ref().unwrap().runtime_class_name, None);
        let annotations = template
            .metadata
            .as_ref()
            .unwrap()
            .annotations
            .as_ref()
            .unwrap();
        assert_eq!(
            annotations
                .get("nvidia.cdi.k8s.io/container.nvidia-device-plugin")
                .map(String::as_str),
            Some("management.nvidia.com/gpu=all")
        );
        assert_eq!(annotations.len(), 1);

        let mut ds = daemonset(&["main"]);
        GpuAccess::RuntimeClass("nvidia".into()).grant(&mut ds, "main");
        let template = &ds.spec.as_ref().unwrap().template;
        assert_eq!(
            template
                .spec
                .as_ref()
                .unwrap()
                .runtime_class_name
                .as_deref(),
            Some("nvidia")
        );
        assert!(template.metadata.is_none());

        let mut hooked = daemonset(&["main"]);
        GpuAccess::OciHook.grant(&mut hooked, "main");
        assert_eq!(hooked, daemonset(&["main"]));
    }
}
