//! The state machine's facts from the cluster: from the GPU node cache ([`UpgradeNode`]) and the
//! cache of the driver and validator pods of the operator namespace ([`OperandPod`]), both kept
//! compact by `crate::cached`, and the driver DaemonSets' templates. The pods on a node that evicts
//! or waits are read by `workload_pod`.

use std::collections::{BTreeMap, HashMap};

use gpu_operator_api::labels;
use gpu_operator_driver::in_sync;
use k8s_openapi::{api::apps::v1::DaemonSet, jiff::Timestamp};

pub use crate::cached::{
    DEPLOY_DRIVER, DRIVER_APP, DRIVER_COMPONENT, OperandPod, UpgradeNode, VALIDATOR_APP,
};
use crate::{
    facts::{NodeFacts, PodFacts},
    state::{FAILURE_REASON, RESTART_POD, STATE_SINCE, UPGRADE_REQUESTED, UpgradeState},
};

impl OperandPod {
    fn facts(&self, (in_sync, older_template): (bool, bool)) -> PodFacts {
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
            older_template,
        }
    }
}

/// The label selector of the driver and validator pods of the ClusterPolicy.
pub fn operand_pods_selector() -> String {
    format!("app in ({DRIVER_APP},{VALIDATOR_APP})")
}

/// The label selector of the driver pods of NVIDIADriver pools (each pool has its own `app`).
pub fn pool_driver_pods_selector() -> String {
    format!(
        "{}={DRIVER_COMPONENT},app notin ({DRIVER_APP})",
        labels::APP_COMPONENT
    )
}

/// The label selector of every driver DaemonSet (see [`is_driver`]).
pub fn driver_daemonsets_selector() -> String {
    format!("{}={DRIVER_COMPONENT}", labels::APP_COMPONENT)
}

/// Whether `ds` is a driver DaemonSet: the ClusterPolicy's or an NVIDIADriver pool's.
pub fn is_driver(ds: &DaemonSet) -> bool {
    ds.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(labels::APP_COMPONENT))
        .map(String::as_str)
        == Some(DRIVER_COMPONENT)
}

/// The driver DaemonSets by name, each with its template's install fingerprint.
pub struct Templates<'a>(BTreeMap<String, (&'a DaemonSet, Option<String>)>);

impl<'a> Templates<'a> {
    /// The driver DaemonSets among `daemonsets`.
    pub fn new(daemonsets: &'a [std::sync::Arc<DaemonSet>]) -> Self {
        Self(
            daemonsets
                .iter()
                .filter(|ds| is_driver(ds))
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

    /// Whether driver pod `pod` runs what its DaemonSet asks for (a pod whose DaemonSet is gone,
    /// an orphan, does not, as NVIDIA's operator counts it), and whether this operator made it from
    /// an older template of that DaemonSet (see [`PodFacts::older_template`]).
    pub fn in_sync(&self, pod: &OperandPod) -> (bool, bool) {
        let Some((ds, desired)) = pod.daemonset.as_deref().and_then(|n| self.0.get(n)) else {
            return (false, false);
        };
        let in_sync = in_sync::in_sync(
            ds,
            desired.as_deref(),
            pod.template_generation(),
            pod.install.as_deref(),
        );
        let current = ds.metadata.generation.map(|g| g.to_string());
        let older =
            pod.ours && current.is_some() && pod.template_generation() != current.as_deref();
        (in_sync, older)
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
    // Looked up once per node: hashed, so a pass stays linear in the fleet.
    let mut drivers: HashMap<&str, &OperandPod> = HashMap::with_capacity(nodes.len());
    let mut validators: HashMap<&str, &OperandPod> = HashMap::with_capacity(nodes.len());
    for pod in pods {
        let Some(node) = pod.node.as_deref() else {
            continue;
        };
        let slot = match pod.app() {
            _ if pod.driver => &mut drivers,
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
            let name = node.name()?.to_owned();
            let label = |key: &str| node.label(key);
            let annotation = |key: &str| node.annotation(key);
            let state = label(labels::DRIVER_UPGRADE_STATE).and_then(UpgradeState::parse);
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
                failure: annotation(FAILURE_REASON).map(str::to_owned),
                restart_pod: annotation(RESTART_POD).map(str::to_owned),
                upgrade_enabled: is_true(labels::DRIVER_UPGRADE_ENABLED),
                client: label(labels::DEPLOY_CLIENT).map(str::to_owned),
                owner: label(labels::DRIVER_OWNER).map(str::to_owned),
                driver,
                validator: validators
                    .get(name.as_str())
                    .map(|p| p.facts((true, false))),
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
        let deploy = n.label(DEPLOY_DRIVER)?;
        (deploy == "true").then_some(n.name()?)
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

#[cfg(test)]
mod tests;
