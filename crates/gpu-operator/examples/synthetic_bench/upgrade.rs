//! The driver upgrade reconciler's share: its own caches (every GPU node as `UpgradeNode`, every
//! driver and validator pod as `OperandPod`) filled as its watches fill them — each full object
//! decoded from the JSON the API server sends, through the same conversions — and its node
//! trigger filter; then the time of one upgrade pass (`view::node_facts` + `plan`) over every
//! node, at rest and when a new driver template puts every node out of sync, and of one node
//! event on its watch.

use std::{collections::BTreeSet, pin::Pin, sync::Arc};

use futures::{
    FutureExt as _, Stream, StreamExt as _,
    channel::mpsc::{UnboundedSender, unbounded},
};
use gpu_operator_api::{ClusterPolicySpec, labels::GPU_PRESENT};
use gpu_operator_driver_upgrade::{
    condition::Summary,
    plan::{self, Step},
    policy::Policy,
    triggers,
    view::{self, DRIVER_APP, OperandPod, Templates, UpgradeNode, VALIDATOR_APP},
};
use gpu_operator_harness::fleet::Fleet;
use gpu_operator_node_labels::resource_api::ResourceApi;
use k8s_openapi::{api::apps::v1::DaemonSet, jiff::Timestamp};
use kube::runtime::{
    reflector::{Store, store::Writer},
    watcher::{self, Event},
};
use serde::Deserialize;
use serde_json::Value;

use crate::{fleet, pods};

/// The upgrade reconciler's caches and node trigger stream, filled.
pub struct Caches {
    nodes: Store<UpgradeNode>,
    pods: Writer<OperandPod>,
    node_events: UnboundedSender<watcher::Result<Event<UpgradeNode>>>,
    woken: Pin<Box<dyn Stream<Item = Arc<UpgradeNode>> + Send>>,
    /// The driver DaemonSets, as the shared cache holds them.
    pub driver: Vec<Arc<DaemonSet>>,
}

/// `object` sent as JSON and decoded as the watch decodes it (into `T`, through `From`).
fn decoded<T: for<'de> Deserialize<'de>>(object: &impl serde::Serialize) -> anyhow::Result<T> {
    Ok(serde_json::from_slice(&serde_json::to_vec(object)?)?)
}

impl Caches {
    /// Fills the caches with the GPU nodes of `fleet` (on `api`) and their driver and validator
    /// pods, made from the rendered objects of the driver (`driver`) and validator (`validator`)
    /// operands.
    pub fn fill(
        fleet: &Fleet,
        spec: &ClusterPolicySpec,
        api: ResourceApi,
        driver: &[Value],
        validator: &[Value],
    ) -> anyhow::Result<Self> {
        let drivers = pods::daemonsets(driver, DRIVER_APP);
        let validators = pods::daemonsets(validator, VALIDATOR_APP);
        let (tx, rx) = unbounded();
        let nodes = Writer::default();
        let mut this = Self {
            nodes: nodes.as_reader(),
            pods: Writer::default(),
            node_events: tx,
            woken: Box::pin(triggers::touched_if(
                rx,
                nodes,
                UpgradeNode::upgrade_inputs_changed,
            )),
            driver: drivers.iter().cloned().map(Arc::new).collect(),
        };
        let (mut version, mut index) = (0_u64, 0_u64);
        for (profile, name) in fleet.nodes() {
            version += 1;
            let node = fleet::full_node(profile, &name, spec, api, version);
            let labels = node.metadata.labels.clone().unwrap_or_default();
            if labels.get(GPU_PRESENT).is_none_or(|v| v != "true") {
                continue;
            }
            let cached: UpgradeNode = decoded(&node)?;
            std::hint::black_box(this.node(cached));
            for ds in [
                pods::for_node(&drivers, &labels),
                pods::for_node(&validators, &labels),
            ]
            .into_iter()
            .flatten()
            {
                index += 1;
                let pod: OperandPod = decoded(&pods::pod(ds, &name, index))?;
                this.pods.apply_watcher_event(&Event::Apply(pod));
            }
        }
        let (nodes, pods) = this.counts();
        anyhow::ensure!(
            pods == 2 * nodes,
            "{pods} operand pods cached for {nodes} GPU nodes: each runs a driver and a validator"
        );
        Ok(this)
    }

    /// A node event of the watch: the trigger stream caches `node` and tells whether it wakes a
    /// pass.
    fn node(&mut self, node: UpgradeNode) -> bool {
        let _ = self.node_events.unbounded_send(Ok(Event::Apply(node)));
        matches!(self.woken.next().now_or_never(), Some(Some(_)))
    }

    /// GPU nodes and operand pods cached.
    pub fn counts(&self) -> (usize, usize) {
        (
            self.nodes.state().len(),
            self.pods.as_reader().state().len(),
        )
    }

    /// One upgrade pass over every node with the driver `templates`: facts, admission, each
    /// node's step, the summary and its condition (no requests); returns the steps that write.
    pub fn pass(&self, templates: &Templates<'_>, policy: &Policy, now: Timestamp) -> usize {
        let (nodes, pods) = (self.nodes.state(), self.pods.as_reader().state());
        let facts = view::node_facts(&nodes, &pods, templates, false);
        let admitted: BTreeSet<String> = plan::admit(&facts, policy).into_iter().collect();
        let available = plan::available(&facts, policy).saturating_sub(admitted.len());
        let steps: Vec<Step> = facts
            .iter()
            .map(|n| plan::step(n, policy, admitted.contains(&n.name), &[], now))
            .collect();
        let mut summary = Summary::of(&facts, &steps, available);
        summary.total = summary.total.max(view::driver_nodes(&nodes, &facts));
        std::hint::black_box(summary.condition(now));
        steps.iter().filter(|s| s.writes()).count()
    }

    /// The node events of the watch: `bodies` (full Nodes as JSON) decoded, cached and filtered,
    /// each in turn; returns how many passed the filter (woke a pass).
    pub fn events(&mut self, bodies: &[Vec<u8>]) -> anyhow::Result<usize> {
        let mut woke = 0;
        for body in bodies {
            let node: UpgradeNode = serde_json::from_slice(body)?;
            woke += usize::from(self.node(node));
        }
        Ok(woke)
    }
}

/// The driver DaemonSets of `driver` after a driver change (generation 2, another image): every
/// driver pod is then out of sync.
pub fn changed_template(driver: &[Arc<DaemonSet>]) -> Vec<Arc<DaemonSet>> {
    driver
        .iter()
        .map(|ds| {
            let mut ds = (**ds).clone();
            ds.metadata.generation = Some(2);
            let containers = ds
                .spec
                .as_mut()
                .and_then(|s| s.template.spec.as_mut())
                .map(|s| &mut s.containers);
            if let Some(first) = containers.into_iter().flatten().next() {
                first.image = first.image.as_ref().map(|i| format!("{i}-next"));
            }
            Arc::new(ds)
        })
        .collect()
}
