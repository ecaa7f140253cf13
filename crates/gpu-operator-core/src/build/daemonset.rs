//! Building an operand DaemonSet: an operand supplies its pod spec; this module adds what every
//! operand shares (NVIDIA's common transforms): the `nvidia.com/gpu.deploy.<operand>=true` node
//! selector, `daemonsets.{labels, annotations, tolerations (replace), priorityClassName,
//! podSecurityContext, updateStrategy, rollingUpdate.maxUnavailable}`, our `daemonsets.{nodeSelector,
//! affinity}` added to every operand's placement, and labels.

use std::collections::BTreeMap;

use gpu_operator_api::spec::{DaemonsetsSpec, EnvVar as SpecEnvVar, UpdateStrategy};
use k8s_openapi::{
    api::{
        apps::v1::{DaemonSet, DaemonSetSpec, DaemonSetUpdateStrategy, RollingUpdateDaemonSet},
        core::v1::{
            EnvVar, EnvVarSource, LocalObjectReference, ObjectFieldSelector, PodSpec,
            PodTemplateSpec, Toleration,
        },
    },
    apimachinery::pkg::{
        apis::meta::v1::{LabelSelector, ObjectMeta},
        util::intstr::IntOrString,
    },
};

use crate::build::{component::Component, meta, placement};

/// Keys users may not set through `daemonsets.labels` or `daemonsets.annotations`: DaemonSet
/// selectors use `app` and `app.kubernetes.io/part-of` (immutable), and our caches and pruning
/// find our objects by `app.kubernetes.io/{managed-by,component}`.
const RESERVED_KEYS: [&str; 4] = [
    meta::APP_LABEL,
    "app.kubernetes.io/part-of",
    meta::MANAGED_BY_LABEL,
    meta::COMPONENT_LABEL,
];
/// Priority class of operand pods unless `daemonsets.priorityClassName` says otherwise.
pub const DEFAULT_PRIORITY_CLASS: &str = "system-node-critical";

/// What identifies one operand DaemonSet.
#[derive(Clone, Copy, Debug)]
pub struct Identity<'a> {
    /// DaemonSet name and `app` label, such as `nvidia-device-plugin-daemonset`.
    pub name: &'a str,
    /// Reconciler that owns it (`app.kubernetes.io/component`).
    pub component: &'a str,
    /// Operand of the `nvidia.com/gpu.deploy.<operand>` node selector, such as `device-plugin`.
    pub deploy_label: &'a str,
    /// The driver is always `OnDelete`, whatever `daemonsets.updateStrategy` says.
    pub always_on_delete: bool,
}

/// The DaemonSet for `pod`, with every shared setting applied.
pub(crate) fn build(id: Identity<'_>, mut pod: PodSpec, common: &DaemonsetsSpec) -> DaemonSet {
    placement::apply(&mut pod, common, id.deploy_label);
    pod.tolerations = Some(match &common.tolerations {
        Some(tolerations) if !tolerations.is_empty() => tolerations.clone(),
        _ => vec![Toleration {
            key: Some("nvidia.com/gpu".to_owned()),
            operator: Some("Exists".to_owned()),
            effect: Some("NoSchedule".to_owned()),
            ..Toleration::default()
        }],
    });
    pod.priority_class_name = Some(
        common
            .priority_class_name
            .clone()
            .unwrap_or_else(|| DEFAULT_PRIORITY_CLASS.to_owned()),
    );
    if let Some(context) = &common.pod_security_context {
        pod.security_context = Some(context.clone());
    }

    let mut labels = meta::labels(id.name, id.component);
    let user_labels = common.labels.clone().unwrap_or_default();
    let mut pod_labels = labels.clone();
    for (key, value) in &user_labels {
        if !RESERVED_KEYS.contains(&key.as_str()) {
            pod_labels.insert(key.clone(), value.clone());
            labels.insert(key.clone(), value.clone());
        }
    }
    let annotations = common
        .annotations
        .iter()
        .flatten()
        .filter(|(key, _)| !RESERVED_KEYS.contains(&key.as_str()))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect::<BTreeMap<_, _>>();
    let annotations = Some(annotations).filter(|a| !a.is_empty());
    DaemonSet {
        metadata: ObjectMeta {
            name: Some(id.name.to_owned()),
            labels: Some(labels),
            annotations: annotations.clone(),
            ..ObjectMeta::default()
        },
        spec: Some(DaemonSetSpec {
            selector: LabelSelector {
                match_labels: Some(BTreeMap::from([(
                    meta::APP_LABEL.to_owned(),
                    id.name.to_owned(),
                )])),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(pod_labels),
                    annotations,
                    ..ObjectMeta::default()
                }),
                spec: Some(pod),
            },
            update_strategy: Some(update_strategy(common, id.always_on_delete)),
            ..DaemonSetSpec::default()
        }),
        status: None,
    }
}

fn update_strategy(common: &DaemonsetsSpec, always_on_delete: bool) -> DaemonSetUpdateStrategy {
    if always_on_delete || common.update_strategy == Some(UpdateStrategy::OnDelete) {
        return DaemonSetUpdateStrategy {
            type_: Some("OnDelete".to_owned()),
            rolling_update: None,
        };
    }
    let max_unavailable = common
        .rolling_update
        .as_ref()
        .and_then(|r| r.max_unavailable.as_deref())
        .map(|value| {
            value
                .parse::<i32>()
                .map_or_else(|_| IntOrString::String(value.to_owned()), IntOrString::Int)
        });
    DaemonSetUpdateStrategy {
        type_: Some("RollingUpdate".to_owned()),
        rolling_update: max_unavailable.map(|m| RollingUpdateDaemonSet {
            max_unavailable: Some(m),
            ..RollingUpdateDaemonSet::default()
        }),
    }
}

/// Applies a component's per-container options (NVIDIA's transforms): `imagePullPolicy` on the
/// containers running the component's image, `resources` on all containers, `imagePullSecrets`,
/// and `hostNetwork` (with the DNS policy host networking needs).
pub(crate) fn apply_component(pod: &mut PodSpec, component: &Component) {
    let policy = component.pull_policy;
    let resources = &component.resources;
    let containers = pod
        .init_containers
        .iter_mut()
        .flatten()
        .chain(pod.containers.iter_mut());
    for c in containers {
        c.image_pull_policy = Some(policy.to_owned());
        if resources.is_some() {
            c.resources.clone_from(resources);
        }
    }
    let secrets: Vec<LocalObjectReference> = component
        .pull_secrets
        .iter()
        .map(|name| LocalObjectReference { name: name.clone() })
        .collect();
    if !secrets.is_empty() {
        pod.image_pull_secrets = Some(secrets);
    }
    if component.host_network {
        pod.host_network = Some(true);
        pod.dns_policy = Some("ClusterFirstWithHostNet".to_owned());
    }
}

/// Replaces the arguments of the operand's main container `main` with the component's `args`
/// when the user set any (NVIDIA's rule: `<component>.args` replace the defaults).
pub(crate) fn apply_args(pod: &mut PodSpec, main: &str, args: &[String]) {
    if args.is_empty() {
        return;
    }
    if let Some(c) = pod.containers.iter_mut().find(|c| c.name == main) {
        c.args = Some(args.to_vec());
    }
}

/// Sets annotation `key` on the pods of `daemonset` (its pod template).
pub fn annotate_pods(daemonset: &mut DaemonSet, key: String, value: String) {
    if let Some(spec) = daemonset.spec.as_mut() {
        spec.template
            .metadata
            .get_or_insert_with(Default::default)
            .annotations
            .get_or_insert_with(Default::default)
            .insert(key, value);
    }
}

/// An env variable from the pod's own fields (downward API), such as `NODE_NAME` from
/// `spec.nodeName`.
pub fn field_env(name: &str, field_path: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value: None,
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: field_path.to_owned(),
                api_version: None,
            }),
            ..EnvVarSource::default()
        }),
    }
}

/// The operator's env for a container, then the user's: a user variable replaces the operator's
/// variable of the same name, new ones are appended. An empty value is left out, as the API
/// server stores it, so the rendered env compares equal to the live one.
pub fn merge_env(defaults: &[(&str, String)], user: &[SpecEnvVar]) -> Vec<EnvVar> {
    let env: Vec<EnvVar> = defaults
        .iter()
        .map(|(name, value)| EnvVar {
            name: (*name).to_owned(),
            value: Some(value.clone()).filter(|v| !v.is_empty()),
            value_from: None,
        })
        .collect();
    override_env(env, user)
}

/// [`merge_env`] over env the operator built itself (which may read pod fields): a user variable
/// replaces the one of the same name, new ones are appended.
pub fn override_env(mut env: Vec<EnvVar>, user: &[SpecEnvVar]) -> Vec<EnvVar> {
    for variable in user {
        let value = variable.value.clone().filter(|v| !v.is_empty());
        match env.iter_mut().find(|e| e.name == variable.name) {
            Some(existing) => {
                existing.value = value;
                existing.value_from = None;
            }
            None => env.push(EnvVar {
                name: variable.name.clone(),
                value,
                value_from: None,
            }),
        }
    }
    env
}

#[cfg(test)]
mod tests {
    use gpu_operator_api::spec::RollingUpdateSpec;

    use super::*;

    const ID: Identity<'static> = Identity {
        name: "nvidia-x",
        component: "x",
        deploy_label: "x",
        always_on_delete: false,
    };

    fn spec(ds: &DaemonSet) -> &DaemonSetSpec {
        ds.spec.as_ref().unwrap()
    }

    #[test]
    fn defaults_select_the_deploy_label_and_tolerate_the_gpu_taint() {
        let ds = build(ID, PodSpec::default(), &DaemonsetsSpec::default());
        let pod = spec(&ds).template.spec.as_ref().unwrap();
        assert_eq!(
            pod.node_selector.as_ref().unwrap()["nvidia.com/gpu.deploy.x"],
            "true"
        );
        assert_eq!(
            pod.tolerations.as_ref().unwrap()[0].key.as_deref(),
            Some("nvidia.com/gpu")
        );
        assert_eq!(
            pod.priority_class_name.as_deref(),
            Some(DEFAULT_PRIORITY_CLASS)
        );
        assert_eq!(
            spec(&ds).update_strategy.as_ref().unwrap().type_.as_deref(),
            Some("RollingUpdate")
        );
        assert_eq!(
            spec(&ds).selector.match_labels.as_ref().unwrap()["app"],
            "nvidia-x"
        );
    }

    #[test]
    fn user_tolerations_replace_and_labels_skip_reserved_keys() {
        let common = DaemonsetsSpec {
            tolerations: Some(vec![Toleration {
                operator: Some("Exists".into()),
                ..Toleration::default()
            }]),
            labels: Some(BTreeMap::from([
                ("team".into(), "ml".into()),
                ("app".into(), "hijack".into()),
            ])),
            ..DaemonsetsSpec::default()
        };
        let ds = build(ID, PodSpec::default(), &common);
        let template = &spec(&ds).template;
        assert_eq!(
            template
                .spec
                .as_ref()
                .unwrap()
                .tolerations
                .as_ref()
                .unwrap()
                .len(),
            1
        );
        assert_eq!(
            template
                .spec
                .as_ref()
                .unwrap()
                .tolerations
                .as_ref()
                .unwrap()[0]
                .key,
            None
        );
        let labels = template.metadata.as_ref().unwrap().labels.as_ref().unwrap();
        assert_eq!(labels["team"], "ml");
        assert_eq!(
            labels["app"], "nvidia-x",
            "the selector label cannot be overridden"
        );
    }

    #[test]
    fn update_strategy_follows_daemonsets_but_the_driver_stays_on_delete() {
        let common = DaemonsetsSpec {
            rolling_update: Some(RollingUpdateSpec {
                max_unavailable: Some("10%".into()),
            }),
            ..DaemonsetsSpec::default()
        };
        let ds = build(ID, PodSpec::default(), &common);
        let strategy = spec(&ds).update_strategy.clone().unwrap();
        assert_eq!(
            strategy.rolling_update.unwrap().max_unavailable,
            Some(IntOrString::String("10%".into()))
        );
        let driver = build(
            Identity {
                always_on_delete: true,
                ..ID
            },
            PodSpec::default(),
            &common,
        );
        assert_eq!(
            spec(&driver)
                .update_strategy
                .as_ref()
                .unwrap()
                .type_
                .as_deref(),
            Some("OnDelete")
        );
        let numeric = DaemonsetsSpec {
            rolling_update: Some(RollingUpdateSpec {
                max_unavailable: Some("2".into()),
            }),
            ..DaemonsetsSpec::default()
        };
        let strategy = spec(&build(ID, PodSpec::default(), &numeric))
            .update_strategy
            .clone()
            .unwrap();
        assert_eq!(
            strategy.rolling_update.unwrap().max_unavailable,
            Some(IntOrString::Int(2))
        );
    }

    #[test]
    fn empty_values_are_left_out_as_the_api_server_stores_them() {
        let env = merge_env(&[("A", String::new())], &[SpecEnvVar::new("B", "")]);
        assert!(env.iter().all(|e| e.value.is_none()), "{env:?}");
    }

    #[test]
    fn annotations_and_labels_never_override_selector_or_ownership_keys() {
        let reserved = BTreeMap::from([
            ("app".into(), "x".into()),
            ("app.kubernetes.io/part-of".into(), "x".into()),
            ("app.kubernetes.io/managed-by".into(), "x".into()),
            ("note".into(), "kept".into()),
        ]);
        let common = DaemonsetsSpec {
            labels: Some(reserved.clone()),
            annotations: Some(reserved),
            ..DaemonsetsSpec::default()
        };
        let ds = build(ID, PodSpec::default(), &common);
        let template = spec(&ds).template.metadata.clone().unwrap();
        let annotations = template.annotations.unwrap();
        assert_eq!(annotations.keys().collect::<Vec<_>>(), ["note"]);
        let labels = ds.metadata.labels.unwrap();
        assert_eq!(labels["app"], "nvidia-x");
        assert_eq!(labels["app.kubernetes.io/managed-by"], "gpu-operator");
        assert_eq!(labels["note"], "kept");
    }

    #[test]
    fn component_args_replace_the_main_containers_args_only_when_set() {
        let mut pod = PodSpec {
            containers: vec![
                k8s_openapi::api::core::v1::Container {
                    name: "main".into(),
                    args: Some(vec!["default".into()]),
                    ..Default::default()
                },
                k8s_openapi::api::core::v1::Container {
                    name: "sidecar".into(),
                    ..Default::default()
                },
            ],
            ..PodSpec::default()
        };
        apply_args(&mut pod, "main", &[]);
        assert_eq!(
            pod.containers[0].args.as_deref(),
            Some(&["default".to_owned()][..])
        );
        let user = vec!["--fail-on-init-error=false".to_owned()];
        apply_args(&mut pod, "main", &user);
        assert_eq!(pod.containers[0].args, Some(user));
        assert_eq!(pod.containers[1].args, None);
    }

    #[test]
    fn user_env_wins_by_name() {
        let env = merge_env(
            &[("A", "1".into()), ("B", "2".into())],
            &[SpecEnvVar::new("B", "user"), SpecEnvVar::new("C", "3")],
        );
        let pairs: Vec<(String, String)> = env
            .into_iter()
            .map(|e| (e.name, e.value.unwrap()))
            .collect();
        assert_eq!(
            pairs,
            vec![
                ("A".into(), "1".into()),
                ("B".into(), "user".into()),
                ("C".into(), "3".into())
            ]
        );
    }
}
