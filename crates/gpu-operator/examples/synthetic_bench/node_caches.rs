//! The shared node caches and their change streams as `gpu-operator run` wires them
//! (`cache::stores`): each event is applied to its cache, then handed to every subscriber of the
//! filtered streams: node label changes (every operand, the overall status, the node labeller),
//! validators' reports (the node summary) and container runtime changes (the operands); with a
//! GPUCluster (`--dra`) its operands subscribe to both like the ClusterPolicy's, and the DRA
//! readiness to the label changes. Each subscriber takes its copy as its Controller would; the
//! filters keep nothing per node.

use std::pin::Pin;

use futures::{FutureExt as _, Stream, StreamExt as _};
use gpu_operator_core::cache::{
    change_stream::{self, Changes, Dispatcher},
    node_meta::NodeMeta,
    node_runtime::NodeRuntime,
    stores::BUFFER,
};
use kube::runtime::{
    reflector::{Store, store::Writer},
    watcher::Event,
};

type Subscriber = Pin<Box<dyn Stream<Item = ()> + Send>>;

/// The node and runtime caches, their dispatchers and subscribers.
pub struct NodeCaches {
    nodes: Writer<NodeMeta>,
    runtimes: Writer<NodeRuntime>,
    node_changes: Dispatcher<NodeMeta>,
    runtime_changes: Dispatcher<NodeRuntime>,
    subscribers: Vec<Subscriber>,
}

fn subscriber<K: Clone + Send + Sync + 'static>(changes: &Changes<K>) -> Subscriber {
    Box::pin(changes.clone().map(|_| ()))
}

impl NodeCaches {
    /// Empty caches with every subscriber `gpu-operator run` starts: `operands` operand
    /// reconcilers (of every owner kind served), the status reconcilers, and with `dra` the DRA
    /// readiness.
    pub fn new(operands: usize, dra: bool) -> Self {
        let (mut node_changes, _all) = change_stream::channel(BUFFER);
        let labels = node_changes.filtered(NodeMeta::labels_changed, BUFFER);
        let reports = node_changes.filtered(NodeMeta::report_changed, BUFFER);
        let (mut runtime_changes, _all) = change_stream::channel(BUFFER);
        let runtimes = runtime_changes.filtered(NodeRuntime::runtime_changed, BUFFER);
        let mut subscribers = Vec::new();
        for _ in 0..operands {
            subscribers.push(subscriber(&labels));
            subscribers.push(subscriber(&runtimes));
        }
        // The overall status, the node labeller, the validators' summary.
        subscribers.extend([
            subscriber(&labels),
            subscriber(&labels),
            subscriber(&reports),
        ]);
        if dra {
            subscribers.push(subscriber(&labels));
        }
        Self {
            nodes: Writer::default(),
            runtimes: Writer::default(),
            node_changes,
            runtime_changes,
            subscribers,
        }
    }

    /// The node cache.
    pub fn nodes(&self) -> Store<NodeMeta> {
        self.nodes.as_reader()
    }

    /// The container runtime cache.
    pub fn runtimes(&self) -> Store<NodeRuntime> {
        self.runtimes.as_reader()
    }

    /// A node event: cached, then handed to the subscribers, each of which takes it.
    pub fn node(&mut self, node: NodeMeta) {
        reflect(&mut self.nodes, &self.node_changes, node);
        self.drain();
    }

    /// A GPU node's runtime event, as [`Self::node`].
    pub fn runtime(&mut self, runtime: NodeRuntime) {
        reflect(&mut self.runtimes, &self.runtime_changes, runtime);
        self.drain();
    }

    fn drain(&mut self) {
        for subscriber in &mut self.subscribers {
            while let Some(Some(())) = subscriber.next().now_or_never() {}
        }
    }
}

/// What `change_stream::reflect` does with one applied `object`: cached, then dispatched.
fn reflect<K>(writer: &mut Writer<K>, dispatcher: &Dispatcher<K>, object: K)
where
    K: kube::Resource<DynamicType = ()> + Clone,
{
    let event = Event::Apply(object);
    let old = change_stream::apply(writer, &event);
    let cache = writer.as_reader();
    // The channels hold the event (capacity to spare): the send completes at once.
    std::hint::black_box(dispatcher.dispatch(&event, old, &cache).now_or_never());
}
