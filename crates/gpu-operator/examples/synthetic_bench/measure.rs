//! One fleet size, measured in this process: the caches and the per-node state of every trigger
//! filter the operator keeps (wired as `gpu-operator run` wires them: the shared node caches and
//! their filters, then the driver upgrade's own node and pod caches and its filter, see
//! [`crate::upgrade`]; with `--dra` the GPUCluster's ResourceSlice cache, see [`crate::dra`]), then
//! the time of each full pass and of one node event, and the requests that event causes.

use std::sync::Arc;

use gpu_operator_api::{ClusterPolicy, ClusterPolicySpec};
use gpu_operator_core::{
    cache::{
        facts::ClusterFacts,
        facts_memo::{self, FactsMemo},
        node_meta::NodeMeta,
    },
    contract::{Cluster, Operand},
};
use gpu_operator_driver_upgrade::{policy::Policy, view::Templates};
use gpu_operator_harness::{fleet::Profile, operator::IMAGES};
use gpu_operator_node_labels::resource_api::ResourceApi;
use gpu_operator_status::node_validation;
use k8s_openapi::{api::core::v1::Node, jiff::Timestamp};
use kube::{ResourceExt as _, core::PartialObjectMeta, runtime::reflector::ObjectRef};
use serde::Serialize;
use serde_json::Value;

use crate::{dra, fleet, node_caches::NodeCaches, upgrade};

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
    /// Of which the shared node caches and the filters over them (labels, operands, status).
    pub core_kib_per_gpu_node: f64,
    /// Of which the driver upgrade's node and pod caches and its node filter.
    pub upgrade_kib_per_gpu_node: f64,
    /// Whether every GPU node is on DRA (a GPUCluster beside the ClusterPolicy).
    pub dra: bool,
    /// Of which (with `dra`) the ResourceSlice cache, its change stream and subscriber.
    pub dra_kib_per_gpu_node: f64,
    /// ResourceSlices cached (with `dra`).
    pub dra_slices: usize,
    /// One DRA readiness pass over every node (`DRAResourcesPublished` from the node and slice
    /// caches), ms (with `dra`).
    pub dra_pass_ms: f64,
    /// Nodes and operand pods in the driver upgrade's caches.
    pub upgrade_cached: (usize, usize),
    /// One driver upgrade pass over every GPU node at rest (every driver in sync), ms.
    pub upgrade_pass_ms: f64,
    /// The same right after a driver change (every driver pod out of sync), ms.
    pub upgrade_rollout_ms: f64,
    /// Nodes that pass moves (each a node patch).
    pub upgrade_rollout_writes: usize,
    /// CPU time of one node event on the upgrade's own watch (the full Node decoded, cached and
    /// filtered), µs.
    pub upgrade_node_event_us: f64,
    /// The node label pass over every node, ms.
    pub label_pass_ms: f64,
    /// The cluster facts from the node caches (each operand's reconcile computes them), ms.
    pub facts_ms: f64,
    /// One full reconcile of each operand without its requests (facts, validate, render, the
    /// compare with the live objects), the facts reused from the trigger's one pass, ms.
    pub operand_ms: Vec<(String, f64)>,
    /// What one node change costs the operand reconciles it wakes, the facts computed once
    /// and shared (as `gpu-operator run` does), ms.
    pub trigger_shared_ms: f64,
    /// The same with the facts computed by every reconcile (before the memo), ms.
    pub trigger_per_reconcile_ms: f64,
    /// The validators' summary over every node, ms.
    pub node_summary_ms: f64,
    /// CPU time of one node event (a node's labels change): cache update, every trigger filter,
    /// the node's label decision, µs.
    pub node_event_us: f64,
    /// Requests a GPU node joining causes: its label patch, and objects whose rendering changed.
    pub event_requests: u32,
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

/// CPU seconds (user + system) this process has used, from `/proc/self/stat` in clock ticks
/// (the machine may be shared, so wall-clock time would count the waits for a core too).
fn cpu_now() -> f64 {
    let ticks = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|stat| {
            let (_, rest) = stat.rsplit_once(')')?;
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let user: f64 = fields.get(11)?.parse().ok()?;
            let system: f64 = fields.get(12)?.parse().ok()?;
            Some(user + system)
        });
    ticks.unwrap_or_default() / 100.0
}

/// CPU milliseconds per run of `f`, over as many runs as 0.3 s of CPU takes (a clock tick is
/// 10 ms), at least `min_runs`.
fn per_run_ms(min_runs: u32, mut f: impl FnMut()) -> f64 {
    let started = cpu_now();
    let mut runs = 0_u32;
    while runs < min_runs || cpu_now() - started < 0.3 {
        f();
        runs += 1;
    }
    (cpu_now() - started) * 1e3 / f64::from(runs)
}

/// The objects an operand renders for `facts`, as JSON (what the compare with the cache reads).
pub fn rendered<O: Operand<Owner = ClusterPolicy>>(
    spec: &ClusterPolicySpec,
    facts: &ClusterFacts,
) -> Vec<Value> {
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
        policy: None,
        server: gpu_operator_core::cache::server_facts::ServerFacts::unknown(),
    };
    let children = match O::validate(spec, &cluster) {
        Ok(Some(input)) => O::render(&input),
        Ok(None) => O::render_disabled(spec, &cluster),
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

/// Measures `gpu_nodes` GPU nodes on `api`.
#[expect(
    clippy::too_many_lines,
    reason = "one measurement after another, in order"
)]
pub fn sample(gpu_nodes: u32, policy: &ClusterPolicy, api: ResourceApi) -> anyhow::Result<Sample> {
    let spec = &policy.spec;
    let on_dra = api == ResourceApi::Dra;
    let fleet = fleet::fleet(gpu_nodes)?;
    let base_rss_mib = rss_mib();
    let operands = crate::OPERANDS.len()
        + if on_dra {
            dra::gpu_cluster_operands()
        } else {
            0
        };
    let mut caches = NodeCaches::new(operands, on_dra);
    let mut version = 0;
    for (profile, name) in fleet.nodes() {
        version += 1;
        caches.node(fleet::node_meta(profile, &name, spec, api, version));
        if profile.gpu_count() > 0 {
            caches.runtime(fleet::node_runtime(profile, &name));
        }
    }
    let (nodes_store, runtimes_store) = (caches.nodes(), caches.runtimes());
    let core_mib = rss_mib() - base_rss_mib;
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
    // The driver upgrade's caches, filled from the rendered driver and validator DaemonSets.
    let render_of = |name: &str| {
        crate::OPERANDS
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, render)| render(spec, &facts))
            .unwrap_or_default()
    };
    let (driver, validator) = (
        render_of(gpu_operator_driver::Driver::NAME),
        render_of(gpu_operator_validator_operand::Validation::NAME),
    );
    let before_upgrade = rss_mib();
    let mut upgrades = upgrade::Caches::fill(&fleet, spec, api, &driver, &validator)?;
    let upgrade_mib = rss_mib() - before_upgrade;
    let upgrade_cached = upgrades.counts();
    // The GPUCluster's ResourceSlice cache, one slice per GPU node, and one readiness pass.
    let (mut dra_mib, mut dra_slices, mut dra_pass_ms) = (0.0, 0, 0.0);
    let slice_cache = if on_dra {
        let before_dra = rss_mib();
        let slice_cache = dra::SliceCache::fill(&fleet)?;
        dra_mib = rss_mib() - before_dra;
        let slices = slice_cache.store();
        dra_slices = slices.state().len();
        dra::ensure_all_ready(
            &dra::readiness(&nodes_store, &slices),
            &nodes,
            real_gpu_nodes,
        )?;
        dra_pass_ms = per_run_ms(3, || {
            std::hint::black_box(dra::readiness(&nodes_store, &slices));
        });
        Some(slice_cache)
    } else {
        None
    };
    let policy_ok = Policy::resolve(spec.driver.upgrade_policy.as_ref())?;
    let now = Timestamp::now();
    let templates = Templates::new(&upgrades.driver);
    let upgrade_pass_ms = per_run_ms(3, || {
        std::hint::black_box(upgrades.pass(&templates, &policy_ok, now));
    });
    let changed = upgrade::changed_template(&upgrades.driver);
    let next = Templates::new(&changed);
    let upgrade_rollout_writes = upgrades.pass(&next, &policy_ok, now);
    let upgrade_rollout_ms = per_run_ms(3, || {
        std::hint::black_box(upgrades.pass(&next, &policy_ok, now));
    });
    drop((next, templates));
    // Node events on the upgrade's watch: the same label change, as the full Node it receives.
    let bodies = fleet
        .nodes()
        .filter(|(p, _)| p.gpu_count() > 0)
        .take(2_000)
        .enumerate()
        .map(|(i, (profile, name))| {
            let mut node = fleet::full_node(profile, &name, spec, api, 1);
            if let Some(labels) = node.metadata.labels.as_mut() {
                labels.insert("example.com/revision".to_owned(), i.to_string());
            }
            serde_json::to_vec(&node)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let started = cpu_now();
    let mut woke = 0;
    let mut decoded = 0_u32;
    while decoded < 20_000 {
        woke += upgrades.events(&bodies)?;
        decoded += u32::try_from(bodies.len()).unwrap_or(u32::MAX);
    }
    let upgrade_node_event_us = (cpu_now() - started) * 1e6 / f64::from(decoded.max(1));
    anyhow::ensure!(
        woke == 0,
        "a label the upgrade never reads woke {woke} upgrade passes"
    );
    drop(bodies);
    let facts_ms = per_run_ms(3, || drop(facts_of(&nodes)));
    let label_pass_ms = per_run_ms(1, || {
        for node in &nodes {
            drop(fleet::label_changes(&node.labels().to_map(), spec, api));
        }
    });
    // The facts as the reconcilers get them: one pass per marked node change, shared.
    let memo = FactsMemo::default();
    let marker = memo.marker();
    let shared = || memo.get(|| facts_of(&nodes)).0;
    let lives: Vec<Vec<Value>> = crate::OPERANDS
        .iter()
        .map(|(_, render)| render(spec, &facts))
        .collect();
    let reconcile = |i: usize, facts: &ClusterFacts| {
        let desired = crate::OPERANDS[i].1(spec, facts);
        let differ = desired
            .iter()
            .zip(&lives[i])
            .filter(|(d, l)| !gpu_operator_core::pipeline::apply::is_subset(d, l))
            .count();
        std::hint::black_box(differ);
    };
    let mut operand_ms = Vec::new();
    for (i, (name, _)) in crate::OPERANDS.iter().enumerate() {
        let time = per_run_ms(3, || reconcile(i, &shared()));
        operand_ms.push(((*name).to_owned(), time));
    }
    // One node change wakes every operand: one pass, then nine reconciles that reuse it …
    let trigger_shared_ms = per_run_ms(3, || {
        marker.mark();
        memo.settle(&marker);
        for i in 0..crate::OPERANDS.len() {
            reconcile(i, &shared());
        }
    });
    // … where each reconcile used to run the pass itself.
    let trigger_per_reconcile_ms = per_run_ms(3, || {
        for i in 0..crate::OPERANDS.len() {
            reconcile(i, &facts_of(&nodes));
        }
    });
    let node_summary_ms = per_run_ms(3, || drop(node_validation::summarize(&nodes)));

    // Node events: a label of a node changes (say a GFD relabel), as the cache, every trigger
    // filter and the node's label decision see it; cycling over the nodes.
    let events = 20_000_u32;
    let changed: Vec<NodeMeta> = (0..events)
        .map(|i| {
            let node = &nodes[i as usize % nodes.len()];
            let mut labels = node.labels().to_map();
            labels.insert("example.com/revision".to_owned(), i.to_string());
            let mut meta = PartialObjectMeta::<Node>::default();
            meta.metadata.name = Some(node.name_any());
            meta.metadata.uid = node.uid();
            meta.metadata.labels = Some(labels);
            meta.into()
        })
        .collect();
    let started = cpu_now();
    for node in changed {
        // The node reflector's facts mark: is it a change the facts read?
        if nodes_store
            .get(&ObjectRef::new(&node.name_any()))
            .is_none_or(|old| facts_memo::node_changed(&old, &node))
        {
            marker.mark();
        }
        let labels = node.labels().to_map();
        caches.node(node);
        memo.settle(&marker);
        std::hint::black_box(fleet::label_changes(&labels, spec, api));
    }
    let node_event_us = (cpu_now() - started) * 1e6 / f64::from(events);
    // What a GPU node joining causes: its label patch, and the objects whose rendering moved
    // (the operands render from the facts of all nodes).
    let joined = fleet::arriving(Profile::H100, "joined", api);
    let mut requests =
        u32::from(!fleet::label_changes(&joined.labels().to_map(), spec, api).is_empty());
    caches.node(fleet::node_meta(
        Profile::H100,
        "joined",
        spec,
        api,
        version + 1,
    ));
    caches.runtime(fleet::node_runtime(Profile::H100, "joined"));
    let after = ClusterFacts::from_nodes(
        nodes_store.state().iter().map(AsRef::as_ref),
        runtimes_store.state().iter().map(AsRef::as_ref),
    );
    for (_, render) in crate::OPERANDS.iter() {
        let (before, now) = (render(spec, &facts), render(spec, &after));
        let moved = before.len().abs_diff(now.len())
            + before.iter().zip(&now).filter(|(b, n)| b != n).count();
        requests += u32::try_from(moved).unwrap_or(u32::MAX);
    }
    drop(slice_cache);
    let per_gpu_node = |mib: f64| mib * 1024.0 / f64::from(real_gpu_nodes.max(1));
    Ok(Sample {
        gpu_nodes: real_gpu_nodes,
        nodes: fleet.total(),
        base_rss_mib,
        kib_per_gpu_node: per_gpu_node(core_mib + upgrade_mib + dra_mib),
        core_kib_per_gpu_node: per_gpu_node(core_mib),
        upgrade_kib_per_gpu_node: per_gpu_node(upgrade_mib),
        dra: on_dra,
        dra_kib_per_gpu_node: per_gpu_node(dra_mib),
        dra_slices,
        dra_pass_ms,
        upgrade_cached,
        upgrade_pass_ms,
        upgrade_rollout_ms,
        upgrade_rollout_writes,
        upgrade_node_event_us,
        label_pass_ms,
        facts_ms,
        operand_ms,
        trigger_shared_ms,
        trigger_per_reconcile_ms,
        node_summary_ms,
        node_event_us,
        event_requests: requests,
    })
}
