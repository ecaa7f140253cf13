//! The state machine's facts from the cluster: a GPU node cache that keeps only what upgrades
//! read ([`UpgradeNode`]: the upgrade labels and annotations, the driver's deploy label, the
//! cordon, the Ready condition), and a
//! cache of the driver and validator pods of the operator namespace ([`OperandPod`], each driver
//! pod reduced to its install fingerprint). The pods on a node that evicts or waits are read by
//! `workload_pod`.

use std::collections::BTreeMap;

use gpu_operator_api::labels;
use gpu_operator_driver::in_sync::{self, InstallConfig, TEMPLATE_GENERATION_LABEL};
use k8s_openapi::{
    api::{
        apps::v1::DaemonSet,
        core::v1::{Node, Pod},
    },
    jiff::Timestamp,
};
use kube::api::ObjectMeta;
use serde::Deserialize;

use crate::{
    facts::{NodeFacts, PodFacts},
    state::{FAILURE_REASON, RESTART_POD, STATE_SINCE, UPGRADE_REQUESTED, UpgradeState},
};

/// The `app` label of the driver pods (every pool's).
pub const DRIVER_APP: &str = gpu_operator_driver::DAEMONSET;
/// The `app` label of the validator pods, whose readiness validates a node's new driver.
pub const VALIDATOR_APP: &str = "nvidia-operator-validator";

/// The node label that schedules the driver pod there (`true`), as the node labeller writes it.
pub const DEPLOY_DRIVER: &str = "nvidia.com/gpu.deploy.driver";

/// Node annotations the upgrade reads.
const ANNOTATIONS: [&str; 6] = [
    labels::DRIVER_UPGRADE_INITIAL_UNSCHEDULABLE,
    labels::DRIVER_UPGRADE_ENABLED,
    UPGRADE_REQUESTED,
    STATE_SINCE,
    FAILURE_REASON,
    RESTART_POD,
];

/// A GPU node as the upgrade cache holds it.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(from = "Node")]
pub struct UpgradeNode {
    metadata: ObjectMeta,
    /// `spec.unschedulable`.
    pub unschedulable: bool,
    /// The `Ready` condition is `True`.
    pub ready: bool,
}

impl From<Node> for UpgradeNode {
    fn from(node: Node) -> Self {
        let keep = |map: Option<BTreeMap<String, String>>, keys: &[&str]| {
            map.map(|m| {
                m.into_iter()
                    .filter(|(k, _)| keys.contains(&k.as_str()))
                    .collect()
            })
        };
        let meta = node.metadata;
        let ready = node
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        Self {
            metadata: ObjectMeta {
                name: meta.name,
                uid: meta.uid,
                resource_version: meta.resource_version,
                labels: keep(
                    meta.labels,
                    &[
                        labels::DRIVER_UPGRADE_STATE,
                        labels::DRIVER_UPGRADE_SKIP,
                        DEPLOY_DRIVER,
                    ],
                ),
                annotations: keep(meta.annotations, &ANNOTATIONS),
                ..ObjectMeta::default()
            },
            unschedulable: node.spec.and_then(|s| s.unschedulable).unwrap_or(false),
            ready,
        }
    }
}

impl UpgradeNode {
    /// Feeds what the state machine reads of the node to `hasher`: the upgrade labels and
    /// annotations (the only ones the cache keeps), the cordon and readiness. A pass is woken only
    /// when this changes, so the labels NFD, GFD or autoscalers keep changing wake nothing.
    pub fn hash_what_upgrades_read(&self, hasher: &mut impl std::hash::Hasher) {
        use std::hash::Hash as _;
        (
            &self.metadata.labels,
            &self.metadata.annotations,
            self.unschedulable,
            self.ready,
        )
            .hash(hasher);
    }
}

gpu_operator_core::projection!(UpgradeNode, Node, k8s_openapi::ClusterResourceScope);

/// A driver or validator pod as the upgrade cache holds it.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(from = "Pod")]
pub struct OperandPod {
    metadata: ObjectMeta,
    /// `spec.nodeName`.
    pub node: Option<String>,
    /// The `Ready` condition is `True`.
    pub ready: bool,
    /// The name of the DaemonSet that owns it.
    pub daemonset: Option<String>,
    /// Driver pods: the install fingerprint of its containers (see `gpu_operator_driver::in_sync`).
    pub install: Option<String>,
}

impl From<Pod> for OperandPod {
    fn from(pod: Pod) -> Self {
        let meta = pod.metadata;
        let app = meta.labels.as_ref().and_then(|l| l.get("app")).cloned();
        let install = (app.as_deref() == Some(DRIVER_APP))
            .then(|| {
                pod.spec
                    .as_ref()
                    .map(|s| InstallConfig::of(s).fingerprint())
            })
            .flatten();
        let daemonset = meta
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true) && o.kind == "DaemonSet")
            .map(|o| o.name.clone());
        let ready = pod
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        let labels = meta.labels.map(|l| {
            l.into_iter()
                .filter(|(k, _)| k == "app" || k == TEMPLATE_GENERATION_LABEL)
                .collect()
        });
        Self {
            metadata: ObjectMeta {
                name: meta.name,
                namespace: meta.namespace,
                uid: meta.uid,
                resource_version: meta.resource_version,
                creation_timestamp: meta.creation_timestamp,
                deletion_timestamp: meta.deletion_timestamp,
                labels,
                ..ObjectMeta::default()
            },
            node: pod.spec.and_then(|s| s.node_name),
            ready,
            daemonset,
            install,
        }
    }
}

impl OperandPod {
    /// The pod's `app` label.
    pub fn app(&self) -> Option<&str> {
        self.metadata
            .labels
            .as_ref()?
            .get("app")
            .map(String::as_str)
    }

    fn facts(&self, in_sync: bool) -> PodFacts {
        PodFacts {
            name: self.metadata.name.clone().unwrap_or_default(),
            uid: self.metadata.uid.clone().unwrap_or_default(),
            created: self
                .metadata
                .creation_timestamp
                .as_ref()
                .map_or(Timestamp::UNIX_EPOCH, |t| t.0),
            ready: self.ready,
            terminating: self.metadata.deletion_timestamp.is_some(),
            in_sync,
        }
    }
}

gpu_operator_core::projection!(OperandPod, Pod, k8s_openapi::NamespaceResourceScope);

/// The driver DaemonSets by name, each with its template's install fingerprint.
pub struct Templates<'a>(BTreeMap<String, (&'a DaemonSet, Option<String>)>);

impl<'a> Templates<'a> {
    /// The driver DaemonSets among `daemonsets`.
    pub fn new(daemonsets: &'a [std::sync::Arc<DaemonSet>]) -> Self {
        Self(
            daemonsets
                .iter()
                .filter(|ds| {
                    ds.metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get("app"))
                        .map(String::as_str)
                        == Some(DRIVER_APP)
                })
                .map(|ds| {
                    let name = ds.metadata.name.clone().unwrap_or_default();
                    (name, (ds.as_ref(), in_sync::template_fingerprint(ds)))
                })
                .collect(),
        )
    }

    /// Whether there is a driver DaemonSet at all.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether driver pod `pod` runs what its DaemonSet asks for; a pod whose DaemonSet is gone
    /// (an orphan) is not, as NVIDIA's operator counts it.
    pub fn in_sync(&self, pod: &OperandPod) -> bool {
        let Some((ds, desired)) = pod.daemonset.as_ref().and_then(|n| self.0.get(n)) else {
            return false;
        };
        let generation = pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(TEMPLATE_GENERATION_LABEL));
        in_sync::in_sync(
            ds,
            desired.as_deref(),
            generation.map(String::as_str),
            pod.install.as_deref(),
        )
    }
}

/// The facts of the GPU nodes in `nodes` with `pods` (driver and validator pods) and the driver
/// `templates`: those that run a driver pod or carry an upgrade state, or `all` of them.
pub fn node_facts(
    nodes: &[std::sync::Arc<UpgradeNode>],
    pods: &[std::sync::Arc<OperandPod>],
    templates: &Templates<'_>,
    all: bool,
) -> Vec<NodeFacts> {
    let mut drivers: BTreeMap<&str, &OperandPod> = BTreeMap::new();
    let mut validators: BTreeMap<&str, &OperandPod> = BTreeMap::new();
    for pod in pods {
        let Some(node) = pod.node.as_deref() else {
            continue;
        };
        let slot = match pod.app() {
            Some(DRIVER_APP) => &mut drivers,
            Some(VALIDATOR_APP) => &mut validators,
            _ => continue,
        };
        // The live pod wins over one still terminating; then the newest.
        let better = slot.get(node).is_none_or(|old| {
            let key = |p: &OperandPod| {
                (
                    p.metadata.deletion_timestamp.is_none(),
                    p.metadata.creation_timestamp.clone(),
                )
            };
            key(pod) > key(old)
        });
        if better {
            slot.insert(node, pod);
        }
    }
    nodes
        .iter()
        .filter_map(|node| {
            let name = node.metadata.name.clone()?;
            let label = |key: &str| node.metadata.labels.as_ref()?.get(key);
            let annotation = |key: &str| node.metadata.annotations.as_ref()?.get(key);
            let state = label(labels::DRIVER_UPGRADE_STATE).and_then(|v| UpgradeState::parse(v));
            let driver = drivers
                .get(name.as_str())
                .map(|p| p.facts(templates.in_sync(p)));
            if driver.is_none() && state.is_none() && !all {
                return None;
            }
            let is_true = |key: &str| annotation(key).is_some_and(|v| v == "true");
            Some(NodeFacts {
                state,
                skip: label(labels::DRIVER_UPGRADE_SKIP).is_some_and(|v| v == "true"),
                unschedulable: node.unschedulable,
                ready: node.ready,
                initially_unschedulable: is_true(labels::DRIVER_UPGRADE_INITIAL_UNSCHEDULABLE),
                requested: is_true(UPGRADE_REQUESTED),
                since: annotation(STATE_SINCE).and_then(|v| v.parse().ok()),
                failure: annotation(FAILURE_REASON).cloned(),
                restart_pod: annotation(RESTART_POD).cloned(),
                upgrade_enabled: is_true(labels::DRIVER_UPGRADE_ENABLED),
                driver,
                validator: validators.get(name.as_str()).map(|p| p.facts(true)),
                name,
            })
        })
        .collect()
}

/// How many GPU nodes run a driver, or are to run one: labelled `nvidia.com/gpu.deploy.driver=true`
/// (the driver DaemonSets select on it), or with a driver pod or an upgrade state in `facts`. The
/// `N/M` of the `DriverUpgrade` condition: counted on nodes, not on driver pods, so it does not
/// move while the pods of a rollout come and go, and a rollout's end crosses a progress step.
pub fn driver_nodes(nodes: &[std::sync::Arc<UpgradeNode>], facts: &[NodeFacts]) -> usize {
    let labelled = nodes.iter().filter_map(|n| {
        let deploy = n.metadata.labels.as_ref()?.get(DEPLOY_DRIVER)?;
        (deploy == "true").then_some(n.metadata.name.as_deref()?)
    });
    let running = facts
        .iter()
        .filter(|f| f.driver.is_some() || f.state.is_some())
        .map(|f| f.name.as_str());
    labelled
        .chain(running)
        .collect::<std::collections::BTreeSet<&str>>()
        .len()
}
