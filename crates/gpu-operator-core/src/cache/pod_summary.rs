//! An operand pod as the problem scan reads it: its name, node, phase, conditions and container
//! states. It deserializes straight from a Pod list, so the rest of each Pod (volumes, env,
//! managed fields: several kilobytes each, hundreds per page) is skipped by the parser instead
//! of being allocated; a heap profile of a 1,000-node rollout showed the scan's pages of full
//! Pods as the operator's peak.

use k8s_openapi::{NamespaceResourceScope, api::core::v1::Pod};
use kube::api::ObjectMeta;
use serde::Deserialize;

/// The parts of a Pod that say whether and why it is not ready.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(from = "Wire")]
pub struct PodSummary {
    metadata: ObjectMeta,
    /// `spec.nodeName`; before the pod is scheduled, the node a DaemonSet made it for (the
    /// `metadata.name` field its required node affinity matches).
    pub node_name: Option<String>,
    /// `status.phase`.
    pub phase: Option<String>,
    /// `status.conditions`.
    pub conditions: Vec<PodCondition>,
    /// `status.initContainerStatuses`, then `status.containerStatuses`.
    pub containers: Vec<ContainerState>,
}

/// One of `status.conditions`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodCondition {
    /// `Ready`, `PodScheduled`, …
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// Human-readable detail.
    #[serde(default)]
    pub message: Option<String>,
}

/// One container's status, reduced to why it waits.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerState {
    /// Container name.
    pub name: String,
    /// Restarts so far.
    #[serde(default)]
    pub restart_count: i32,
    /// `state.waiting.reason` when the container waits (`""` when it waits without one).
    #[serde(default, rename = "state", deserialize_with = "waiting_reason")]
    pub waiting: Option<String>,
}

crate::projection!(PodSummary, Pod, NamespaceResourceScope);

/// `state.waiting.reason`, present (possibly empty) only when the container waits.
fn waiting_reason<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    struct State {
        waiting: Option<Waiting>,
    }
    #[derive(Deserialize)]
    struct Waiting {
        reason: Option<String>,
    }
    let state = Option::<State>::deserialize(deserializer)?;
    Ok(state
        .and_then(|s| s.waiting)
        .map(|w| w.reason.unwrap_or_default()))
}

/// The parts of a Pod's JSON that are read; serde skips every other field.
#[derive(Deserialize)]
struct Wire {
    #[serde(default)]
    metadata: WireMeta,
    #[serde(default)]
    spec: WireSpec,
    #[serde(default)]
    status: WireStatus,
}

#[derive(Default, Deserialize)]
struct WireMeta {
    name: Option<String>,
    namespace: Option<String>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireSpec {
    node_name: Option<String>,
    affinity: Option<WireAffinity>,
}

/// `spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms
/// [].matchFields[]`: where a DaemonSet names its pod's node.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireAffinity {
    node_affinity: Option<WireNodeAffinity>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireNodeAffinity {
    required_during_scheduling_ignored_during_execution: Option<WireSelector>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireSelector {
    #[serde(default)]
    node_selector_terms: Vec<WireTerm>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireTerm {
    #[serde(default)]
    match_fields: Vec<WireField>,
}

#[derive(Default, Deserialize)]
struct WireField {
    key: String,
    #[serde(default)]
    values: Vec<String>,
}

impl WireSpec {
    /// `nodeName`, else the one node the required node affinity names by `metadata.name`.
    fn node(self) -> Option<String> {
        self.node_name.or_else(|| {
            self.affinity?
                .node_affinity?
                .required_during_scheduling_ignored_during_execution?
                .node_selector_terms
                .into_iter()
                .flat_map(|t| t.match_fields)
                .find(|f| f.key == "metadata.name" && f.values.len() == 1)
                .and_then(|f| f.values.into_iter().next())
        })
    }
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireStatus {
    phase: Option<String>,
    #[serde(default)]
    conditions: Vec<PodCondition>,
    #[serde(default)]
    init_container_statuses: Vec<ContainerState>,
    #[serde(default)]
    container_statuses: Vec<ContainerState>,
}

impl From<Wire> for PodSummary {
    fn from(wire: Wire) -> Self {
        let WireStatus {
            phase,
            conditions,
            mut init_container_statuses,
            container_statuses,
        } = wire.status;
        init_container_statuses.extend(container_statuses);
        Self {
            metadata: ObjectMeta {
                name: wire.metadata.name,
                namespace: wire.metadata.namespace,
                ..ObjectMeta::default()
            },
            node_name: wire.spec.node(),
            phase,
            conditions,
            containers: init_container_statuses,
        }
    }
}

#[cfg(test)]
mod tests {
    use kube::{Resource as _, ResourceExt as _};
    use serde_json::json;

    use super::*;

    #[test]
    fn an_unscheduled_daemonset_pod_names_the_node_it_is_for() {
        let term = |key: &str, values: &[&str]| {
            json!({"metadata": {"name": "p"}, "spec": {"affinity": {"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchFields": [{"key": key, "operator": "In", "values": values}]}]}}}}})
        };
        let read = |v: serde_json::Value| serde_json::from_value::<PodSummary>(v).unwrap();
        assert_eq!(
            read(term("metadata.name", &["n1"])).node_name.as_deref(),
            Some("n1")
        );
        assert_eq!(read(term("metadata.name", &["n1", "n2"])).node_name, None);
        assert_eq!(read(term("other", &["n1"])).node_name, None);
        let scheduled = json!({"spec": {"nodeName": "n0", "affinity": {}}});
        assert_eq!(read(scheduled).node_name.as_deref(), Some("n0"));
    }

    #[test]
    fn a_pod_is_read_down_to_its_readiness() {
        let pod: PodSummary = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns", "managedFields": [{"manager": "kubelet"}]},
            "spec": {"nodeName": "n1", "volumes": [{"name": "v", "hostPath": {"path": "/run"}}]},
            "status": {
                "phase": "Pending",
                "conditions": [{"type": "PodScheduled", "status": "True"}],
                "initContainerStatuses": [{"name": "init", "restartCount": 0, "state": {"running": {}}}],
                "containerStatuses": [{"name": "c", "restartCount": 2, "state": {"waiting": {}}}]
            }
        }))
        .unwrap();
        assert_eq!(
            (pod.name_any(), pod.namespace()),
            ("p".into(), Some("ns".into()))
        );
        assert_eq!(pod.node_name.as_deref(), Some("n1"));
        assert_eq!(pod.phase.as_deref(), Some("Pending"));
        assert_eq!(pod.conditions[0].type_, "PodScheduled");
        let states: Vec<_> = pod
            .containers
            .iter()
            .map(|c| (c.name.as_str(), c.waiting.as_deref(), c.restart_count))
            .collect();
        assert_eq!(states, [("init", None, 0), ("c", Some(""), 2)]);
        assert_eq!(PodSummary::plural(&()), "pods");
    }
}
