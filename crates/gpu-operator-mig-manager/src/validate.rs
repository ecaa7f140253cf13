//! Checks the ClusterPolicy for the MIG manager, resolves its images and notices a seeded layout
//! that the default layouts lack. Pure.

use std::collections::BTreeMap;

use gpu_operator_api::ClusterPolicySpec;
use gpu_operator_core::{
    Error,
    build::{
        component::Component,
        runtime_class::{self, GpuAccess},
        shared::Shared,
        user_config::{self, Checked, Source},
    },
    cache::facts::NodeSample,
    contract::{Cluster, Warning},
};

use crate::{CUSTOM_CONFIG, DEFAULT_CONFIG, parted, profiles};

/// The key of a layouts ConfigMap the manager reads.
const LAYOUTS_KEY: &str = "config.yaml";

/// What rendering the MIG manager needs.
#[derive(Clone, Debug)]
pub struct Input {
    /// The MIG manager image.
    pub image: String,
    /// The validator image, which runs the `toolkit-validation` barrier.
    pub validator_image: String,
    /// How the pods reach the GPUs (RuntimeClass or NRI annotation).
    pub gpu_access: GpuAccess,
    /// The checked copy of the user's layouts ConfigMap (`migManager.config.name`), if any.
    pub custom: Option<Checked>,
    /// The operator namespace (role-binding subjects).
    pub namespace: String,
    /// `spec.migManager`'s container settings.
    pub component: Component,
    /// The user's layouts ConfigMap (`migManager.config.name`), if any.
    pub custom_config: Option<String>,
    /// The user's GPU clients ConfigMap (`migManager.gpuClientsConfig.name`), if any.
    pub custom_gpu_clients: Option<String>,
    /// The layout seeded on MIG-capable nodes (`migManager.config.default`, by default
    /// `MigPartedConfigSpec::DEFAULT_LAYOUT`); `None` when set empty.
    pub seeded_layout: Option<String>,
    /// Whether CDI is enabled (`cdi.enabled`, default true).
    pub cdi_enabled: bool,
    /// The toolkit's CDI hook, when CDI is on and the operator deploys the toolkit.
    pub cdi_hook_path: Option<String>,
    /// The settings every operand pod shares.
    pub shared: Shared,
    /// GPU nodes whose layout failed to apply, by layout (see [`crate::watchdog`]).
    pub failed: BTreeMap<String, NodeSample>,
    /// GPU nodes stuck applying their layout past the watchdog's timeout, by layout.
    pub stuck: BTreeMap<String, NodeSample>,
}

/// `Ok(None)` when `migManager.enabled` is false (it defaults to true).
pub fn validate(spec: &ClusterPolicySpec, cluster: &Cluster<'_>) -> Result<Option<Input>, Error> {
    let section = spec.mig_manager.clone().unwrap_or_default();
    if section.enabled == Some(false) {
        return Ok(None);
    }
    let image = cluster.image("migManager", &section.image, "MIG_MANAGER_IMAGE")?;
    let validator_image = cluster.validator_image(spec)?;
    let non_empty = |name: Option<&String>| name.filter(|n| !n.is_empty()).cloned();
    let custom_config = non_empty(section.config.as_ref().and_then(|c| c.name.as_ref()));
    let custom = match &custom_config {
        Some(name) => Some(check_custom(cluster, name)?),
        None => None,
    };
    Ok(Some(Input {
        image,
        validator_image,
        gpu_access: GpuAccess::of(spec, cluster.facts),
        custom,
        namespace: cluster.namespace.to_owned(),
        component: Component::of(&section.image, &section.container, section.host_network),
        custom_config,
        custom_gpu_clients: non_empty(
            section
                .gpu_clients_config
                .as_ref()
                .and_then(|c| c.name.as_ref()),
        ),
        seeded_layout: section.seeded_layout().map(str::to_owned),
        cdi_enabled: runtime_class::cdi_enabled(spec),
        cdi_hook_path: runtime_class::cdi_hook_path(spec),
        shared: Shared::of(spec),
        failed: cluster.facts.mig_failed.clone(),
        stuck: cluster.facts.mig_stuck.clone(),
    }))
}

/// The user's layouts ConfigMap checked by mig-parted's rules: its `config.yaml` must be a
/// mig-parted configuration (other keys are not read by the manager).
fn check_custom(cluster: &Cluster<'_>, name: &str) -> Result<Checked, Error> {
    let source = Source {
        field: "migManager.config.name",
        name,
        required_key: Some((
            LAYOUTS_KEY,
            "the MIG manager reads its layouts from that key: put the mig-parted configuration \
             there",
        )),
    };
    let check = |key: &str, text: &str| {
        if key != LAYOUTS_KEY {
            return Ok(Vec::new());
        }
        parted::layouts(text)
            .map(|_| Vec::new())
            .map_err(|e| e.to_string())
    };
    user_config::check(
        cluster.namespace,
        cluster.config_maps,
        source,
        CUSTOM_CONFIG,
        &check,
    )
}

/// A seeded layout (`migManager.config.default`) missing from the layouts the manager reads (the
/// user's, else the default ones): every node seeded with it would fail to partition.
pub fn warnings(input: &Input) -> Vec<Warning> {
    let Some(seeded) = input.seeded_layout.clone() else {
        return Vec::new();
    };
    if let Some(custom) = &input.custom {
        let layouts = custom
            .config_map
            .data
            .as_ref()
            .and_then(|d| d.get(LAYOUTS_KEY))
            .and_then(|text| parted::layouts(text).ok())
            .unwrap_or_default();
        if layouts.contains(&seeded) {
            return Vec::new();
        }
        let name = input.custom_config.as_deref().unwrap_or_default();
        return vec![Warning {
            reason: "MIGConfigNotFound",
            message: format!(
                "migManager.config.default is {seeded:?}, which is not a layout of ConfigMap \
                 {name} (key {LAYOUTS_KEY}), so MIG-capable nodes seeded with it fail to \
                 partition: add the layout or set migManager.config.default to one of its layouts"
            ),
        }];
    }
    if profiles::default_layouts().contains(&seeded) {
        return Vec::new();
    }
    vec![Warning {
        reason: "MIGConfigNotFound",
        message: format!(
            "migManager.config.default is {seeded:?}, which is not a layout of ConfigMap \
             {DEFAULT_CONFIG} (such as all-disabled, all-balanced or all-1g.10gb), so MIG-capable \
             nodes seeded with it fail to partition: set it to one of that ConfigMap's layouts, \
             or set migManager.config.name to a ConfigMap whose config.yaml defines {seeded:?}"
        ),
    }]
}

/// `spec` validated as the operator would, with a valid layouts ConfigMap (layout
/// `all-disabled`) under any name the spec gives.
#[cfg(test)]
pub fn for_tests(spec: &ClusterPolicySpec) -> Input {
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::ConfigMap;

    let facts = gpu_operator_core::cache::facts::ClusterFacts::default();
    let layouts = ConfigMap {
        data: Some(
            [(
                LAYOUTS_KEY.to_owned(),
                "version: v1\nmig-configs:\n  all-disabled:\n    - devices: all\n      \
                 mig-enabled: false\n"
                    .to_owned(),
            )]
            .into(),
        ),
        ..ConfigMap::default()
    };
    let lookup = move |_: &str| Some(Arc::new(layouts.clone()));
    let cluster = Cluster {
        namespace: "gpu-operator",
        facts: &facts,
        image_env: &|name: &str| Some(format!("x/{name}:1")),
        config_maps: &lookup,
        policy: None,
        server: gpu_operator_core::cache::server_facts::ServerFacts::unknown(),
    };
    match validate(spec, &cluster) {
        Ok(Some(input)) => input,
        other => panic!("{spec:?} does not validate: {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use gpu_operator_api::spec::{MigManagerSpec, MigPartedConfigSpec};
    use gpu_operator_core::cache::facts::ClusterFacts;
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;

    fn spec(config: Option<MigPartedConfigSpec>, enabled: Option<bool>) -> ClusterPolicySpec {
        ClusterPolicySpec {
            mig_manager: Some(MigManagerSpec {
                enabled,
                config,
                ..MigManagerSpec::default()
            }),
            ..ClusterPolicySpec::default()
        }
    }

    fn config(name: Option<&str>, default: &str) -> MigPartedConfigSpec {
        MigPartedConfigSpec {
            name: name.map(Into::into),
            default: Some(default.into()),
        }
    }

    /// Validation with ConfigMap `mine` holding `data`.
    fn with_config_map(
        spec: &ClusterPolicySpec,
        data: &[(&str, &str)],
    ) -> Result<Option<Input>, Error> {
        let facts = ClusterFacts::default();
        let mine = ConfigMap {
            data: Some(
                data.iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            ),
            ..ConfigMap::default()
        };
        let lookup = move |name: &str| (name == "mine").then(|| Arc::new(mine.clone()));
        let cluster = Cluster {
            namespace: "gpu-operator",
            facts: &facts,
            image_env: &|name: &str| Some(format!("x/{name}:1")),
            config_maps: &lookup,
            policy: None,
            server: gpu_operator_core::cache::server_facts::ServerFacts::unknown(),
        };
        validate(spec, &cluster)
    }

    fn seeded(default: &str, name: Option<&str>) -> Vec<Warning> {
        warnings(&for_tests(&spec(Some(config(name, default)), None)))
    }

    #[test]
    fn disabled_renders_nothing() {
        assert!(
            with_config_map(&spec(None, Some(false)), &[])
                .unwrap()
                .is_none()
        );
        assert!(with_config_map(&spec(None, None), &[]).unwrap().is_some());
    }

    #[test]
    fn a_seeded_layout_missing_from_the_layouts_read_is_reported_by_name() {
        assert!(seeded("all-1g.10gb", None).is_empty());
        assert!(seeded("", None).is_empty());
        assert!(warnings(&for_tests(&spec(None, None))).is_empty());
        let missing = seeded("all-9g.99gb", None);
        assert_eq!(missing[0].reason, "MIGConfigNotFound");
        assert!(
            missing[0].message.contains("\"all-9g.99gb\"")
                && missing[0].message.contains(DEFAULT_CONFIG),
            "{}",
            missing[0].message
        );
        assert!(seeded("all-disabled", Some("mine")).is_empty());
        let missing = seeded("all-1g.10gb", Some("mine"));
        assert!(
            missing[0]
                .message
                .contains("not a layout of ConfigMap mine"),
            "a user's ConfigMap is judged by its own layouts: {}",
            missing[0].message
        );
    }

    #[test]
    fn a_users_layouts_are_checked_and_copied() {
        let spec = spec(Some(config(Some("mine"), "custom")), None);
        let layouts =
            "version: v1\nmig-configs:\n  custom:\n    - devices: all\n      mig-enabled: false\n";
        let input = with_config_map(&spec, &[("config.yaml", layouts), ("notes", "anything")])
            .unwrap()
            .unwrap();
        let custom = input.custom.as_ref().unwrap();
        assert_eq!(
            custom.config_map.metadata.name.as_deref(),
            Some(CUSTOM_CONFIG)
        );
        assert_eq!(
            custom.config_map.data.as_ref().unwrap()["config.yaml"],
            layouts
        );
        assert!(warnings(&input).is_empty());

        let error = with_config_map(&spec, &[("config.yaml", "version: v2\n")])
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("gpu-operator/mine")
                && error.contains("key \"config.yaml\"")
                && error.contains("v2"),
            "{error}"
        );
        let error = with_config_map(&spec, &[("layouts.yaml", layouts)])
            .unwrap_err()
            .to_string();
        assert!(error.contains("no key \"config.yaml\""), "{error}");
        let error = with_config_map(&self::spec(Some(config(Some("absent"), "")), None), &[])
            .unwrap_err()
            .to_string();
        assert!(error.contains("does not exist"), "{error}");
    }
}
