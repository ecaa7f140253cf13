//! The NVIDIA RuntimeClasses, as NVIDIA's `pre-requisites` creates them: `nvidia` (name and handler
//! from `operator.runtimeClass`) always, `nvidia-cdi` and `nvidia-legacy` while CDI is enabled;
//! none with the NRI plugin, which injects GPUs without a runtime handler. The handlers are the
//! ones the toolkit registers in the runtime's configuration.

use gpu_operator_api::ClusterPolicySpec;
use gpu_operator_core::{
    build::{
        meta,
        runtime_class::{self, CDI_RUNTIME_CLASS, LEGACY_RUNTIME_CLASS},
    },
    contract::Operand as _,
};
use k8s_openapi::{api::node::v1::RuntimeClass, apimachinery::pkg::apis::meta::v1::ObjectMeta};

use crate::Toolkit;

fn runtime_class(name: &str) -> RuntimeClass {
    RuntimeClass {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(meta::labels(name, Toolkit::NAME)),
            ..ObjectMeta::default()
        },
        handler: name.to_owned(),
        ..RuntimeClass::default()
    }
}

/// The settings the RuntimeClasses and the toolkit's runtime wiring follow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeSettings {
    /// `operator.runtimeClass`, `nvidia` when unset or empty.
    pub configured_name: String,
    /// Whether CDI is enabled (`cdi.enabled`, default true).
    pub cdi_enabled: bool,
    /// Whether the NRI plugin injects GPUs (`cdi.nriPluginEnabled`, default false).
    pub nri_plugin_enabled: bool,
}

impl RuntimeSettings {
    /// The settings of `spec`.
    pub fn of(spec: &ClusterPolicySpec) -> Self {
        Self {
            configured_name: runtime_class::configured_name(spec).to_owned(),
            cdi_enabled: runtime_class::cdi_enabled(spec),
            nri_plugin_enabled: runtime_class::nri_plugin_enabled(spec),
        }
    }
}

/// The RuntimeClasses `settings` ask for.
pub fn runtime_classes(settings: &RuntimeSettings) -> Vec<RuntimeClass> {
    if settings.nri_plugin_enabled {
        return Vec::new();
    }
    let mut names = vec![settings.configured_name.as_str()];
    if settings.cdi_enabled {
        for extra in [CDI_RUNTIME_CLASS, LEGACY_RUNTIME_CLASS] {
            if !names.contains(&extra) {
                names.push(extra);
            }
        }
    }
    names.into_iter().map(runtime_class).collect()
}

#[cfg(test)]
mod tests {
    use gpu_operator_api::spec::CdiSpec;

    use super::*;

    fn names(spec: &ClusterPolicySpec) -> Vec<(String, String)> {
        runtime_classes(&RuntimeSettings::of(spec))
            .into_iter()
            .map(|r| (r.metadata.name.unwrap(), r.handler))
            .collect()
    }

    #[test]
    fn runtime_class_names_and_handlers_follow_nvidia() {
        let mut spec = ClusterPolicySpec::default();
        let pairs = |list: &[&str]| -> Vec<(String, String)> {
            list.iter()
                .map(|n| ((*n).to_owned(), (*n).to_owned()))
                .collect()
        };
        assert_eq!(
            names(&spec),
            pairs(&["nvidia", "nvidia-cdi", "nvidia-legacy"])
        );
        spec.operator.runtime_class = Some("nvidia-gpu".into());
        assert_eq!(
            names(&spec),
            pairs(&["nvidia-gpu", "nvidia-cdi", "nvidia-legacy"])
        );
        spec.cdi = Some(CdiSpec {
            enabled: Some(false),
            ..CdiSpec::default()
        });
        assert_eq!(names(&spec), pairs(&["nvidia-gpu"]));
        spec.cdi = Some(CdiSpec {
            nri_plugin_enabled: Some(true),
            ..CdiSpec::default()
        });
        assert!(names(&spec).is_empty());
    }
}
