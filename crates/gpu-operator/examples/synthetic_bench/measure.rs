//! One fleet size, measured in this process: the caches and the per-node state of every trigger
//! filter the operator keeps (wired as `gpu-operator run` wires them), then the time of each full
//! pass and of one node event, and the requests that event causes.

use std::{
    hash::Hash as _,
    pin::Pin,
    sync::Arc,
    time::{Duration, Instant},
};

use futures::{
    FutureExt as _, Stream, StreamExt as _,
    channel::mpsc::{UnboundedSender, unbounded},
};
use gpu_operator_api::{ClusterPolicy, ClusterPolicySpec};
use gpu_operator_core::{
    controller,
    facts::ClusterFacts,
    node_meta::NodeMeta,
    node_runtime::NodeRuntime,
    node_validation,
    operand::{Cluster, Operand},
};
use gpu_operator_e2e::{fleet::Profile, operator::IMAGES};
use gpu_operator_node_labels::triggers::NodeLabelFilter;
use kube::{
    ResourceExt as _,
    runtime::{
        reflector::{ObjectRef, store::Writer},
        watcher::Event,
    },
};
use serde::Serialize;
use serde_json::Value;

use crate::fleet;

/// What one size measured.
#[derive(Debug, Default, Serialize)]
pub struct Sample {
    /// GPU nodes (the fleet has one CPU-only node for every six).
    pub gpu_nodes: u32,
    /// All nodes.
    pub nodes: u32,
    /// Resident memory before the caches were filled, MiB.
    pub base_rss_mib: f64,
    /// What the caches and trigger filters added, KiB per GPU node.
    pub kib_per_gpu_node: f64,
    /// The node label pass over every node, ms.
    pub label_pass_ms: f64,
    /// The cluster facts from the node caches (each operand's reconcile computes them), ms.
    pub facts_ms: f64,
    /// One full reconcile of each operand without its requests (facts, validate, render, the
    /// compare with the live objects), ms.
    pub operand_ms: Vec<(String, f64)>,
    /// The validators' summary over every node, ms.
    pub node_summary_ms: f64,
    /// One node event (a GPU node joins): cache update, every trigger filter, the node's label
    /// decision, µs.
    pub node_event_us: f64,
    /// Requests that event causes: the node's label patch, and objects whose rendering changed.
    pub event_requests: u32,
}

type Filter = Pin<Box<dyn Stream<Item = ()> + Send>>;

/// The trigger filters `gpu-operator run` builds over the node caches (per operand, node label
/// changes and runtime changes; the status reconciler's label changes; the validators' summary),
/// fed by the returned senders as the shared reflector feeds them.
struct Filters {
    nodes: Vec<UnboundedSender<Arc<NodeMeta>>>,
    runtimes: Vec<UnboundedSender<Arc<NodeRuntime>>>,
    filters: Vec<Filter>,
}

impl Filters {
    fn new() -> Self {
        let mut this = Self {
            nodes: Vec::new(),
            runtimes: Vec::new(),
            filters: Vec::new(),
        };
        for _ in crate::OPERANDS {
            let (tx, rx) = unbounded();
            this.nodes.push(tx);
            this.filters
                .push(Box::pin(controller::label_changes(rx).map(|_| ())));
            let (tx, rx) = unbounded::<Arc<NodeRuntime>>();
            this.runtimes.push(tx);
            this.filters.push(Box::pin(
                controller::changes(rx, |n, h| n.container_runtime_version.hash(h)).map(|_| ()),
            ));
        }
        let (tx, rx) = unbounded();
        this.nodes.push(tx);
        this.filters
            .push(Box::pin(controller::label_changes(rx).map(|_| ())));
        let (tx, rx) = unbounded::<Arc<NodeMeta>>();
        this.nodes.push(tx);
        this.filters.push(Box::pin(
            controller::changes(rx, |n: &NodeMeta, h| n.validation().hash(h)).map(|_| ()),
        ));
        this
    }

    /// Passes `node` (new, so it passes every filter) through all of them.
    fn node(&mut self, node: &Arc<NodeMeta>, runtime: Option<&Arc<NodeRuntime>>) {
        for tx in &self.nodes {
            let _ = tx.unbounded_send(node.clone());
        }
        if let Some(runtime) = runtime {
            for tx in &self.runtimes {
                let _ = tx.unbounded_send(runtime.clone());
            }
        }
        let wanted = self.nodes.len() + runtime.map_or(0, |_| self.runtimes.len());
        let mut seen = 0;
        while seen < wanted {
            for filter in &mut self.filters {
                if let Some(Some(())) = filter.next().now_or_never() {
                    seen += 1;
                }
            }
        }
    }
}

fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or(0.0, |kib| kib / 1024.0)
}

/// The median of `runs` timings of `f`.
fn median(runs: usize, mut f: impl FnMut()) -> Duration {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let started = Instant::now();
            f();
            started.elapsed()
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

/// The objects an operand renders for `facts`, as JSON (what the compare with the cache reads).
pub fn rendered<O: Operand>(spec: &ClusterPolicySpec, facts: &ClusterFacts) -> Vec<Value> {
    let image_env = |name: &str| {
        IMAGES
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| (*v).to_owned())
    };
    let config_maps = |_: &str| None;
    let cluster = Cluster {
        namespace: "gpu-operator",
        facts,
        image_env: &image_env,
        config_maps: &config_maps,
    };
    let children = match O::validate(spec, &cluster) {
        Ok(Some(input)) => O::render(&input),
        Ok(None) => O::render_disabled(spec),
        Err(_) => return Vec::new(),
    };
    let c = children;
    let mut out = Vec::new();
    let mut push = |value: serde_json::Result<Value>| out.extend(value.ok());
    c.service_accounts
        .iter()
        .for_each(|o| push(serde_json::to_value(o)));
    c.roles.iter().for_each(|o| push(serde_json::to_value(o)));
    c.role_bindings
        .iter()
        .for_each(|o| push(serde_json::to_value(o)));
    c.cluster_roles
        .iter()
        .for_each(|o| push(serde_json::to_value(o)));
    c.cluster_role_bindings
        .iter()
        .for_each(|o| push(serde_json::to_value(o)));
    c.config_maps
        .iter()
        .for_each(|o| push(serde_json::to_value(o)));
    c.services
        .iter()
        .for_each(|o| push(serde_json::to_value(o)));
    c.runtime_classes
        .iter()
        .for_each(|o| push(serde_json::to_value(o)));
    c.daemonsets
        .iter()
        .for_each(|o| push(serde_json::to_value(o)));
    c.service_monitors
        .iter()
        .for_each(|o| push(serde_json::to_value(o)));
    out
}

/// Measures `gpu_nodes` GPU nodes.
pub fn sample(gpu_nodes: u32, policy: &ClusterPolicy) -> anyhow::Result<Sample> {
    let spec = &policy.spec;
    let fleet = fleet::fleet(gpu_nodes)?;
    let base_rss_mib = rss_mib();
    let mut node_writer = Writer::<NodeMeta>::default();
    let mut runtime_writer = Writer::<NodeRuntime>::default();
    let mut version = 0;
    for (profile, name) in fleet.nodes() {
        version += 1;
        node_writer.apply_watcher_event(&Event::Apply(fleet::node_meta(
            profile, &name, spec, version,
        )));
        if profile.gpu_count() > 0 {
            runtime_writer.apply_watcher_event(&Event::Apply(fleet::node_runtime(profile, &name)));
        }
    }
    let nodes_store = node_writer.as_reader();
    let runtimes_store = runtime_writer.as_reader();
    let (nodes, runtimes) = (nodes_store.state(), runtimes_store.state());
    let mut label_filter = NodeLabelFilter::new(nodes_store.clone());
    let mut filters = Filters::new();
    for node in &nodes {
        label_filter.changed(node);
        let runtime = runtimes_store.get(&ObjectRef::new(&node.name_any()));
        filters.node(node, runtime.as_ref());
    }
    drop((nodes, runtimes));
    let grown_mib = rss_mib() - base_rss_mib;
    let real_gpu_nodes: u32 = Profile::ALL
        .iter()
        .filter(|p| p.gpu_count() > 0)
        .map(|p| fleet.count(*p))
        .sum();

    let nodes = nodes_store.state();
    let runtimes = runtimes_store.state();
    let facts_of = |nodes: &[Arc<NodeMeta>]| {
        ClusterFacts::from_nodes(
            nodes.iter().map(AsRef::as_ref),
            runtimes.iter().map(AsRef::as_ref),
        )
    };
    let facts = facts_of(&nodes);
    let facts_ms = median(5, || drop(facts_of(&nodes))).as_secs_f64() * 1e3;
    let label_pass_ms = median(3, || {
        for node in &nodes {
            drop(gpu_operator_node_labels::label_changes(
                &node.labels().to_map(),
                spec,
            ));
        }
    })
    .as_secs_f64()
        * 1e3;
    let mut operand_ms = Vec::new();
    for (name, render) in crate::OPERANDS {
        let live = render(spec, &facts);
        let time = median(5, || {
            let facts = facts_of(&nodes);
            let desired = render(spec, &facts);
            let differ = desired
                .iter()
                .zip(&live)
                .filter(|(d, l)| !gpu_operator_core::apply::is_subset(d, l))
                .count();
            drop(differ);
        });
        operand_ms.push(((*name).to_owned(), time.as_secs_f64() * 1e3));
    }
    let node_summary_ms =
        median(5, || drop(node_validation::summarize(&nodes))).as_secs_f64() * 1e3;

    // One node event: a GPU node joins (unlabelled by us yet), as the caches and filters see it.
    let events = 1000_u32;
    let joined: Vec<(NodeMeta, NodeRuntime)> = (0..events)
        .map(|i| {
            let name = format!("joined-{i}");
            (
                fleet::arriving(Profile::H100, &name),
                fleet::node_runtime(Profile::H100, &name),
            )
        })
        .collect();
    let mut requests = 0;
    let started = Instant::now();
    for (node, runtime) in joined {
        node_writer.apply_watcher_event(&Event::Apply(node.clone()));
        let node = Arc::new(node);
        label_filter.changed(&node);
        filters.node(&node, Some(&Arc::new(runtime)));
        let changes = gpu_operator_node_labels::label_changes(&node.labels().to_map(), spec);
        requests = u32::from(!changes.is_empty());
    }
    let node_event_us = started.elapsed().as_secs_f64() * 1e6 / f64::from(events);
    // The operands render from the facts; objects whose rendering moved would be applied.
    let after = facts_of(&nodes_store.state());
    for (_, render) in crate::OPERANDS {
        let (before, now) = (render(spec, &facts), render(spec, &after));
        let moved = before.len().abs_diff(now.len())
            + before.iter().zip(&now).filter(|(b, n)| b != n).count();
        requests += u32::try_from(moved).unwrap_or(u32::MAX);
    }
    Ok(Sample {
        gpu_nodes: real_gpu_nodes,
        nodes: fleet.total(),
        base_rss_mib,
        kib_per_gpu_node: grown_mib * 1024.0 / f64::from(real_gpu_nodes.max(1)),
        label_pass_ms,
        facts_ms,
        operand_ms,
        node_summary_ms,
        node_event_us,
        event_requests: requests,
    })
}
