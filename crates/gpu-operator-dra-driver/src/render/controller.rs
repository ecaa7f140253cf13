//! Deployment `nvidia-dra-driver-controller` (with `computeDomains` only): the ComputeDomain
//! controller, one replica preferring control-plane nodes, tolerating their taints and the
//! GPUCluster's `daemonsets.tolerations`, with NVIDIA's variables (leader election off, the lease
//! named for it in the operator namespace), the feature gates, and
//! `computeDomains.controller.{env, resources}`. The `daemonsets` labels, annotations and
//! priority class apply to it as NVIDIA applies them.

use std::collections::BTreeMap;

use gpu_operator_core::build::{
    daemonset::{DEFAULT_PRIORITY_CLASS, field_env, override_env},
    meta,
};
use k8s_openapi::{
    api::{
        apps::v1::{Deployment, DeploymentSpec},
        core::v1::{
            Affinity, Container, EnvVar, LocalObjectReference, NodeAffinity,
            NodeSelectorRequirement, NodeSelectorTerm, PodAffinityTerm, PodAntiAffinity, PodSpec,
            PodTemplateSpec, PreferredSchedulingTerm, Toleration, WeightedPodAffinityTerm,
        },
    },
    apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta},
};

use super::rbac::{CONTROLLER, labels};
use crate::{Input, feature_gates, validate::ComputeDomains};

/// Keys `daemonsets.labels`/`annotations` may not set (selectors and our own bookkeeping).
const RESERVED: [&str; 4] = [
    meta::APP_LABEL,
    "app.kubernetes.io/part-of",
    meta::MANAGED_BY_LABEL,
    meta::COMPONENT_LABEL,
];

/// The Deployment, `None` without `computeDomains`.
pub fn build(input: &Input) -> Option<Deployment> {
    let cd = input.compute_domains.as_ref()?;
    let daemonsets = &input.shared.daemonsets;
    let mut object_labels = labels(CONTROLLER);
    for (key, value) in daemonsets.labels.iter().flatten() {
        if !RESERVED.contains(&key.as_str()) {
            object_labels.insert(key.clone(), value.clone());
        }
    }
    let annotations: BTreeMap<String, String> = daemonsets
        .annotations
        .iter()
        .flatten()
        .filter(|(key, _)| !RESERVED.contains(&key.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let annotations = Some(annotations).filter(|a| !a.is_empty());
    let mut tolerations = vec![
        taint("node-role.kubernetes.io/control-plane", Some("NoSchedule")),
        taint("node-role.kubernetes.io/master", Some("NoSchedule")),
        taint("CriticalAddonsOnly", None),
    ];
    tolerations.extend(daemonsets.tolerations.iter().flatten().cloned());
    let secrets: Vec<LocalObjectReference> = input
        .component
        .pull_secrets
        .iter()
        .map(|name| LocalObjectReference { name: name.clone() })
        .collect();
    let pod = PodSpec {
        priority_class_name: Some(
            daemonsets
                .priority_class_name
                .clone()
                .unwrap_or_else(|| DEFAULT_PRIORITY_CLASS.to_owned()),
        ),
        service_account_name: Some(CONTROLLER.to_owned()),
        image_pull_secrets: Some(secrets).filter(|s| !s.is_empty()),
        affinity: Some(placement()),
        tolerations: Some(tolerations),
        containers: vec![container(input, cd)],
        ..PodSpec::default()
    };
    Some(Deployment {
        metadata: ObjectMeta {
            name: Some(CONTROLLER.to_owned()),
            labels: Some(object_labels.clone()),
            annotations: annotations.clone(),
            ..ObjectMeta::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(1),
            selector: LabelSelector {
                match_labels: Some(app_selector()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(object_labels),
                    annotations,
                    ..ObjectMeta::default()
                }),
                spec: Some(pod),
            },
            ..DeploymentSpec::default()
        }),
        status: None,
    })
}

fn app_selector() -> BTreeMap<String, String> {
    BTreeMap::from([(meta::APP_LABEL.to_owned(), CONTROLLER.to_owned())])
}

fn taint(key: &str, effect: Option<&str>) -> Toleration {
    Toleration {
        key: Some(key.to_owned()),
        operator: Some("Exists".to_owned()),
        effect: effect.map(str::to_owned),
        ..Toleration::default()
    }
}

/// Control-plane nodes preferred, replicas spread over nodes.
fn placement() -> Affinity {
    Affinity {
        node_affinity: Some(NodeAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(vec![
                PreferredSchedulingTerm {
                    weight: 100,
                    preference: NodeSelectorTerm {
                        match_expressions: Some(vec![NodeSelectorRequirement {
                            key: "node-role.kubernetes.io/control-plane".to_owned(),
                            operator: "Exists".to_owned(),
                            values: None,
                        }]),
                        ..NodeSelectorTerm::default()
                    },
                },
            ]),
            ..NodeAffinity::default()
        }),
        pod_anti_affinity: Some(PodAntiAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(vec![
                WeightedPodAffinityTerm {
                    weight: 100,
                    pod_affinity_term: PodAffinityTerm {
                        label_selector: Some(LabelSelector {
                            match_labels: Some(app_selector()),
                            ..LabelSelector::default()
                        }),
                        topology_key: "kubernetes.io/hostname".to_owned(),
                        ..PodAffinityTerm::default()
                    },
                },
            ]),
            ..PodAntiAffinity::default()
        }),
        ..Affinity::default()
    }
}

fn container(input: &Input, cd: &ComputeDomains) -> Container {
    let literal = |name: &str, value: &str| EnvVar {
        name: name.to_owned(),
        value: Some(value.to_owned()).filter(|v| !v.is_empty()),
        value_from: None,
    };
    let mut env = vec![
        literal("HTTP_ENDPOINT", ":8080"),
        literal("METRICS_PATH", "/metrics"),
        literal("PPROF_PATH", ""),
        literal("LOG_VERBOSITY", "4"),
        literal("LOG_VERBOSITY_CD_DAEMON", "4"),
        field_env("POD_NAME", "metadata.name"),
        field_env("NAMESPACE", "metadata.namespace"),
        literal("IMAGE_NAME", &input.image),
        literal("NVIDIA_VISIBLE_DEVICES", "void"),
        literal("LEADER_ELECTION_ENABLED", "false"),
        literal("LEADER_ELECTION_LEASE_LOCK_NAME", CONTROLLER),
        literal("LEADER_ELECTION_LEASE_LOCK_NAMESPACE", &input.namespace),
        literal("LEADER_ELECTION_LEASE_DURATION", "15s"),
        literal("LEADER_ELECTION_RENEW_DEADLINE", "10s"),
        literal("LEADER_ELECTION_RETRY_PERIOD", "2s"),
    ];
    if !input.feature_gates.is_empty() {
        env.push(literal(
            "FEATURE_GATES",
            &feature_gates::env_value(&input.feature_gates),
        ));
    }
    Container {
        name: "compute-domain".to_owned(),
        image: Some(input.image.clone()),
        image_pull_policy: Some(input.component.pull_policy.to_owned()),
        command: Some(
            ["compute-domain-controller", "-v", "$(LOG_VERBOSITY)"]
                .map(str::to_owned)
                .to_vec(),
        ),
        env: Some(override_env(env, &cd.controller_env)),
        resources: cd.controller_resources.clone(),
        ..Container::default()
    }
}
