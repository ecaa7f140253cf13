//! The upgrade reconciler's two caches, compact: a GPU node keeps only what upgrades read
//! ([`UpgradeNode`]: the upgrade labels and annotations, the driver's deploy label, the cordon,
//! the Ready condition) and a driver or validator pod only what its facts need ([`OperandPod`],
//! a driver pod reduced to its install fingerprint). Both caches hold one entry per GPU node (two
//! pods per node), so the kept labels and annotations are short slices keyed by the `&'static`
//! names the upgrade reads, not `BTreeMap`s (whose tree nodes cost more than the few entries), and
//! nothing of the object's metadata is kept that no step reads (a node's uid, a pod's other labels).

use std::{borrow::Cow, collections::BTreeMap};

use gpu_operator_api::labels;
use gpu_operator_driver::in_sync::{InstallConfig, TEMPLATE_GENERATION_LABEL};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::ObjectMeta;
use serde::Deserialize;

use crate::state::{FAILURE_REASON, RESTART_POD, STATE_SINCE, UPGRADE_REQUESTED};

/// The `app` label of the driver pods (every pool's).
pub const DRIVER_APP: &str = gpu_operator_driver::DAEMONSET;
/// The `app.kubernetes.io/component` label of every driver DaemonSet and pod, the ClusterPolicy's
/// and each NVIDIADriver pool's (whose `app` labels differ per pool).
pub const DRIVER_COMPONENT: &str = "nvidia-driver";
/// The `app` label of the validator pods, whose readiness validates a node's new driver.
pub const VALIDATOR_APP: &str = "nvidia-operator-validator";

/// The node label that schedules the driver pod there (`true`), as the node labeller writes it.
pub const DEPLOY_DRIVER: &str = "nvidia.com/gpu.deploy.driver";

/// Node labels the upgrade reads.
const LABELS: [&str; 5] = [
    labels::DRIVER_UPGRADE_STATE,
    labels::DRIVER_UPGRADE_SKIP,
    DEPLOY_DRIVER,
    labels::DEPLOY_CLIENT,
    labels::DRIVER_OWNER,
];

/// Node annotations the upgrade reads.
const ANNOTATIONS: [&str; 6] = [
    labels::DRIVER_UPGRADE_INITIAL_UNSCHEDULABLE,
    labels::DRIVER_UPGRADE_ENABLED,
    UPGRADE_REQUESTED,
    STATE_SINCE,
    FAILURE_REASON,
    RESTART_POD,
];

/// The entries of `map` whose keys are among `keys`, each keyed by its `&'static` name, in the
/// order of `keys`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
struct Kept(Box<[(&'static str, Box<str>)]>);

impl Kept {
    fn of(map: Option<BTreeMap<String, String>>, keys: &[&'static str]) -> Self {
        let mut map = map.unwrap_or_default();
        Self(
            keys.iter()
                .filter_map(|key| Some((*key, map.remove(*key)?.into_boxed_str())))
                .collect(),
        )
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| *k == key).map(|(_, v)| &**v)
    }
}

/// Whether the `Ready` condition among `conditions` (type, status) is `True`: a node's or a pod's.
fn is_ready<'a>(mut conditions: impl Iterator<Item = (&'a str, &'a str)>) -> bool {
    conditions.any(|(type_, status)| type_ == "Ready" && status == "True")
}

/// A GPU node as the upgrade cache holds it.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(from = "Node")]
pub struct UpgradeNode {
    /// Name and resource version (the watch resumes from the latest).
    pub(crate) metadata: ObjectMeta,
    labels: Kept,
    annotations: Kept,
    /// `spec.unschedulable`.
    pub unschedulable: bool,
    /// The `Ready` condition is `True`.
    pub ready: bool,
}

impl From<Node> for UpgradeNode {
    fn from(node: Node) -> Self {
        let meta = node.metadata;
        let conditions = node.status.and_then(|s| s.conditions).unwrap_or_default();
        let ready = is_ready(conditions.iter().map(|c| (&*c.type_, &*c.status)));
        Self {
            metadata: ObjectMeta {
                name: meta.name,
                resource_version: meta.resource_version,
                ..ObjectMeta::default()
            },
            labels: Kept::of(meta.labels, &LABELS),
            annotations: Kept::of(meta.annotations, &ANNOTATIONS),
            unschedulable: node.spec.and_then(|s| s.unschedulable).unwrap_or(false),
            ready,
        }
    }
}

impl UpgradeNode {
    /// The node's name.
    pub fn name(&self) -> Option<&str> {
        self.metadata.name.as_deref()
    }

    /// Label `key`, if it is one the upgrade reads and the node has it.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key)
    }

    /// Annotation `key`, if it is one the upgrade reads and the node has it.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.annotations.get(key)
    }

    /// Whether `new` differs from `old` in what the state machine reads of a node: the upgrade
    /// labels and annotations (the only ones the cache keeps), the cordon and readiness. A pass is
    /// woken only then, so the labels NFD, GFD or autoscalers keep changing wake nothing.
    pub fn upgrade_inputs_changed(old: &Self, new: &Self) -> bool {
        (&old.labels, &old.annotations, old.unschedulable, old.ready)
            != (&new.labels, &new.annotations, new.unschedulable, new.ready)
    }
}

gpu_operator_core::projection!(UpgradeNode, Node, k8s_openapi::ClusterResourceScope);

/// A driver or validator pod as the upgrade cache holds it.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(from = "Pod")]
pub struct OperandPod {
    /// Name, namespace, uid, resource version, creation and deletion timestamps.
    pub(crate) metadata: ObjectMeta,
    /// The `app` label (the two watched apps without an allocation of their own).
    app: Option<Cow<'static, str>>,
    /// The `pod-template-generation` label.
    generation: Option<Box<str>>,
    /// `spec.nodeName`.
    pub node: Option<Box<str>>,
    /// The `Ready` condition is `True`.
    pub ready: bool,
    /// The name of the DaemonSet that owns it.
    pub daemonset: Option<Box<str>>,
    /// Driver pods: the install fingerprint of its containers (see `gpu_operator_driver::in_sync`).
    pub install: Option<Box<str>>,
    /// A driver pod: the ClusterPolicy's (`app`) or an NVIDIADriver pool's (component label).
    pub driver: bool,
    /// Made from a template of this operator: `app.kubernetes.io/part-of=gpu-operator`, which
    /// NVIDIA's templates never carry (NVIDIA's chart puts `app.kubernetes.io/managed-by:
    /// gpu-operator` in `daemonsets.labels`, so that one tells nothing) and which neither operator
    /// lets `daemonsets.labels` override.
    pub ours: bool,
}

impl From<Pod> for OperandPod {
    fn from(pod: Pod) -> Self {
        let meta = pod.metadata;
        let mut labels = meta.labels.unwrap_or_default();
        let app = labels.remove("app").map(|app| match app.as_str() {
            DRIVER_APP => Cow::Borrowed(DRIVER_APP),
            VALIDATOR_APP => Cow::Borrowed(VALIDATOR_APP),
            _ => Cow::Owned(app),
        });
        let driver = app.as_deref() == Some(DRIVER_APP)
            || labels
                .get(gpu_operator_api::labels::APP_COMPONENT)
                .map(String::as_str)
                == Some(DRIVER_COMPONENT);
        let install = driver
            .then(|| {
                pod.spec
                    .as_ref()
                    .map(|s| InstallConfig::of(s).fingerprint().into_boxed_str())
            })
            .flatten();
        let daemonset = meta
            .owner_references
            .into_iter()
            .flatten()
            .find(|o| o.controller == Some(true) && o.kind == "DaemonSet")
            .map(|o| o.name.into_boxed_str());
        let ours = labels
            .get(gpu_operator_api::labels::APP_PART_OF)
            .map(String::as_str)
            == Some(gpu_operator_api::labels::MANAGED_BY_VALUE);
        let conditions = pod.status.and_then(|s| s.conditions).unwrap_or_default();
        let ready = is_ready(conditions.iter().map(|c| (&*c.type_, &*c.status)));
        Self {
            metadata: ObjectMeta {
                name: meta.name,
                namespace: meta.namespace,
                uid: meta.uid,
                resource_version: meta.resource_version,
                creation_timestamp: meta.creation_timestamp,
                deletion_timestamp: meta.deletion_timestamp,
                ..ObjectMeta::default()
            },
            app,
            generation: labels
                .remove(TEMPLATE_GENERATION_LABEL)
                .map(String::into_boxed_str),
            node: pod
                .spec
                .and_then(|s| s.node_name)
                .map(String::into_boxed_str),
            ready,
            daemonset,
            install,
            driver,
            ours,
        }
    }
}

impl OperandPod {
    /// The pod's `app` label.
    pub fn app(&self) -> Option<&str> {
        self.app.as_deref()
    }

    /// The pod's `pod-template-generation` label.
    pub fn template_generation(&self) -> Option<&str> {
        self.generation.as_deref()
    }
}

gpu_operator_core::projection!(OperandPod, Pod, k8s_openapi::NamespaceResourceScope);

#[cfg(test)]
mod tests {
    use kube::{Resource as _, ResourceExt as _};
    use serde_json::json;

    use super::*;

    #[test]
    fn a_node_keeps_its_name_version_and_the_upgrade_labels_and_annotations_only() {
        // Names by hand, as NVIDIA's runbooks spell them.
        let node: UpgradeNode = serde_json::from_value(json!({
            "metadata": {
                "name": "gpu-1", "uid": "u-1", "resourceVersion": "7",
                "labels": {
                    "nvidia.com/gpu-driver-upgrade-state": "upgrade-done",
                    "nvidia.com/gpu.deploy.driver": "true",
                    "nvidia.com/gpu.present": "true",
                },
                "annotations": {
                    "nvidia.com/gpu-driver-upgrade-enabled": "true",
                    "node.alpha.kubernetes.io/ttl": "0",
                },
            },
            "spec": {"unschedulable": true},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        }))
        .unwrap();
        assert_eq!(node.name(), Some("gpu-1"));
        assert_eq!(node.resource_version().as_deref(), Some("7"));
        assert_eq!(
            node.label("nvidia.com/gpu-driver-upgrade-state"),
            Some("upgrade-done")
        );
        assert_eq!(node.label("nvidia.com/gpu.deploy.driver"), Some("true"));
        assert_eq!(node.label("nvidia.com/gpu.present"), None);
        assert_eq!(
            node.annotation("nvidia.com/gpu-driver-upgrade-enabled"),
            Some("true")
        );
        assert_eq!(node.annotation("node.alpha.kubernetes.io/ttl"), None);
        assert!(node.unschedulable && node.ready);
        let meta = node.meta();
        assert!(meta.uid.is_none() && meta.labels.is_none() && meta.annotations.is_none());
    }

    #[test]
    fn a_pod_keeps_its_app_generation_node_owner_and_readiness_only() {
        let pod: OperandPod = serde_json::from_value(json!({
            "metadata": {
                "name": "nvidia-driver-daemonset-abcde", "namespace": "gpu-operator",
                "uid": "p-1", "resourceVersion": "9",
                "creationTimestamp": "2026-11-20T08:00:00Z",
                "labels": {
                    "app": "nvidia-driver-daemonset",
                    "pod-template-generation": "3",
                    "controller-revision-hash": "6d8f7c9b54",
                },
                "ownerReferences": [{
                    "apiVersion": "apps/v1", "kind": "DaemonSet", "controller": true,
                    "name": "nvidia-driver-daemonset-ubuntu22.04", "uid": "ds-1",
                }],
            },
            "spec": {"nodeName": "gpu-1", "containers": [{"name": "nvidia-driver-ctr", "image": "driver:1"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        }))
        .unwrap();
        assert_eq!(pod.name_any(), "nvidia-driver-daemonset-abcde");
        assert_eq!(pod.namespace().as_deref(), Some("gpu-operator"));
        assert_eq!(pod.uid().as_deref(), Some("p-1"));
        assert_eq!(pod.app(), Some("nvidia-driver-daemonset"));
        assert_eq!(pod.template_generation(), Some("3"));
        assert_eq!(pod.node.as_deref(), Some("gpu-1"));
        assert_eq!(
            pod.daemonset.as_deref(),
            Some("nvidia-driver-daemonset-ubuntu22.04")
        );
        assert!(pod.ready && pod.install.is_some());
        assert!(pod.meta().labels.is_none() && pod.meta().owner_references.is_none());
        // NVIDIA's driver pods carry `managed-by: gpu-operator` (its chart's `daemonsets.labels`)
        // but never our `part-of`: only ours are restarted in place for a template change.
        let ours = |labels: serde_json::Value| {
            serde_json::from_value::<OperandPod>(
                json!({"metadata": {"name": "d", "labels": labels}}),
            )
            .unwrap()
            .ours
        };
        assert!(!ours(json!({
            "app": "nvidia-driver-daemonset",
            "app.kubernetes.io/managed-by": "gpu-operator",
            "helm.sh/chart": "gpu-operator-v26.7.0",
        })));
        assert!(ours(json!({
            "app": "nvidia-driver-daemonset",
            "app.kubernetes.io/managed-by": "gpu-operator",
            "app.kubernetes.io/part-of": "gpu-operator",
        })));
        let validator: OperandPod = serde_json::from_value(json!({
            "metadata": {"name": "v", "labels": {"app": "nvidia-operator-validator"}},
        }))
        .unwrap();
        assert_eq!(validator.app(), Some("nvidia-operator-validator"));
        assert!(
            validator.install.is_none(),
            "only driver pods are fingerprinted"
        );
    }
}
