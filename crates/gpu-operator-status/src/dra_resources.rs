//! Whether the DRA nodes offer their GPUs, read from DRA's own objects: on a node served by the
//! DRA driver `nvidia.com/gpu` is never allocatable, so readiness there is the driver's
//! ResourceSlices (`gpu.nvidia.com`, cached as `SliceSummary`). A DRA node (the node labeller
//! gave it `nvidia.com/gpu.deploy.dra-driver=true`) is ready when
//!
//! 1. it has slices of the driver (else `no ResourceSlice for gpu.nvidia.com`);
//! 2. each of its pools is complete: every one of the `resourceSliceCount` slices of the pool's
//!    newest generation is there (else `pool incomplete: 1 of 2 slices`; older generations are
//!    the driver's leftovers during an update and are not read);
//! 3. the physical GPUs those slices publish (the `gpu` devices, and the parent GPUs of the `mig`
//!    devices) number GPU Feature Discovery's `nvidia.com/gpu.count` (else `2 of 8 GPUs
//!    published`); without that label, at least one.
//!
//! [`summarize`] turns that into the GPUCluster's `DRAResourcesPublished` condition (counts, and
//! the first nodes that are not ready with why), written by [`reconcile`] through the status
//! batch like `NodesValidated` on the ClusterPolicy. It informs; it does not gate `Ready`.

use std::{collections::BTreeMap, sync::Arc, time::Instant};

use gpu_operator_api::{GpuCluster, conditions::gpu_cluster::DRA_RESOURCES_PUBLISHED, labels};
use gpu_operator_core::{
    Context, Error,
    cache::{
        node_meta::NodeMeta,
        resource_slice::{NVIDIA_GPU_DRIVER, SliceSummary},
    },
    pipeline::{
        active,
        status_write::{self, Outcome},
    },
    report::{conditions::Desired, problems::PROBLEM_NODES},
};
use kube::runtime::controller::Action;

/// Name of this reconciler (field manager suffix, metric label).
pub const NAME: &str = "dra-resources";

/// Why a DRA node's GPUs are not all offered yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotReady {
    /// The driver published no slice for the node.
    NoSlice,
    /// A pool misses slices of its newest generation.
    PoolIncomplete {
        /// Slices of the newest generation present.
        present: usize,
        /// `resourceSliceCount` of that generation.
        expected: i64,
    },
    /// Fewer GPUs published than the node has.
    GpusMissing {
        /// Physical GPUs published.
        published: usize,
        /// `nvidia.com/gpu.count`, if the node has it.
        expected: Option<u64>,
    },
}

impl std::fmt::Display for NotReady {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoSlice => write!(f, "no ResourceSlice for {NVIDIA_GPU_DRIVER}"),
            Self::PoolIncomplete { present, expected } => {
                write!(f, "pool incomplete: {present} of {expected} slices")
            }
            Self::GpusMissing {
                published,
                expected: Some(expected),
            } => write!(f, "{published} of {expected} GPUs published"),
            Self::GpusMissing {
                published,
                expected: None,
            } => write!(f, "{published} GPUs published"),
        }
    }
}

/// Whether `node` runs the DRA driver: the labeller gave it the kubelet plugin's gate.
pub fn is_dra_node(node: &NodeMeta) -> bool {
    node.labels().get(labels::DEPLOY_DRA_DRIVER) == Some("true")
}

/// Whether the node whose GPU count is `gpu_count` (`nvidia.com/gpu.count`) offers its GPUs
/// through `slices` (the driver's slices of that node). Pure.
pub fn node_readiness(gpu_count: Option<u64>, slices: &[&SliceSummary]) -> Result<(), NotReady> {
    let ours: Vec<&SliceSummary> = slices
        .iter()
        .copied()
        .filter(|s| s.driver == NVIDIA_GPU_DRIVER)
        .collect();
    if ours.is_empty() {
        return Err(NotReady::NoSlice);
    }
    let mut pools: BTreeMap<&str, Vec<&SliceSummary>> = BTreeMap::new();
    for slice in ours {
        pools.entry(slice.pool.as_str()).or_default().push(slice);
    }
    let mut gpus: Vec<&str> = Vec::new();
    for slices in pools.values() {
        let newest = slices
            .iter()
            .map(|s| s.generation)
            .max()
            .unwrap_or_default();
        let current: Vec<&&SliceSummary> =
            slices.iter().filter(|s| s.generation == newest).collect();
        let expected = current
            .iter()
            .map(|s| s.slice_count)
            .max()
            .unwrap_or_default();
        let present = current.len();
        if i64::try_from(present).unwrap_or(i64::MAX) < expected {
            return Err(NotReady::PoolIncomplete { present, expected });
        }
        gpus.extend(
            current
                .iter()
                .flat_map(|s| &s.physical_gpus)
                .map(String::as_str),
        );
    }
    gpus.sort_unstable();
    gpus.dedup();
    let published = gpus.len();
    let enough = match gpu_count {
        Some(expected) => u64::try_from(published).unwrap_or(u64::MAX) >= expected,
        None => published >= 1,
    };
    if enough {
        Ok(())
    } else {
        Err(NotReady::GpusMissing {
            published,
            expected: gpu_count,
        })
    }
}

/// The node's `nvidia.com/gpu.count`, when GPU Feature Discovery wrote a number.
fn gpu_count(node: &NodeMeta) -> Option<u64> {
    node.labels()
        .get(labels::GPU_COUNT)
        .and_then(|v| v.trim().parse().ok())
}

/// The `DRAResourcesPublished` condition over `nodes` and the driver's `slices`. Pure.
pub fn summarize(nodes: &[Arc<NodeMeta>], slices: &[Arc<SliceSummary>]) -> Desired {
    let mut dra_nodes: Vec<&NodeMeta> = nodes
        .iter()
        .map(AsRef::as_ref)
        .filter(|n| is_dra_node(n))
        .collect();
    if dra_nodes.is_empty() {
        return Desired::ok(
            DRA_RESOURCES_PUBLISHED,
            "NoDRANodes",
            "no node runs the DRA driver (gate nvidia.com/gpu.deploy.dra-driver=true)",
        );
    }
    dra_nodes.sort_by(|a, b| a.name().cmp(b.name()));
    let mut by_node: BTreeMap<&str, Vec<&SliceSummary>> = BTreeMap::new();
    for slice in slices {
        by_node
            .entry(slice.node.as_str())
            .or_default()
            .push(slice.as_ref());
    }
    let total = dra_nodes.len();
    let mut ready = 0;
    let mut problems = Vec::new();
    for node in dra_nodes {
        let slices = by_node.get(node.name()).map_or(&[][..], Vec::as_slice);
        match node_readiness(gpu_count(node), slices) {
            Ok(()) => ready += 1,
            Err(why) if problems.len() < PROBLEM_NODES => {
                problems.push(format!("{} ({why})", node.name()));
            }
            Err(_) => {}
        }
    }
    let counts = format!("DRA nodes ready: {ready}/{total}");
    let desired = if ready == total {
        Desired::ok(DRA_RESOURCES_PUBLISHED, "AllDRANodesPublished", counts)
    } else {
        Desired::not_ok(
            DRA_RESOURCES_PUBLISHED,
            "DRANodesNotPublished",
            format!("{counts}; not ready: {}", problems.join("; ")),
        )
    };
    desired.with_progress(ready, total)
}

/// Writes the summary into the active GPUCluster.
pub async fn reconcile(cluster: Arc<GpuCluster>, ctx: Arc<Context>) -> Result<Action, Error> {
    let started = Instant::now();
    let result = async {
        if !active::is_active(cluster.as_ref(), &ctx.stores.gpu_clusters.state()) {
            return Ok(Action::await_change());
        }
        let desired = summarize(
            &ctx.stores.nodes.state(),
            &ctx.stores.resource_slices.state(),
        );
        Ok(
            match status_write::write_gated(&ctx, cluster.as_ref(), NAME, &desired) {
                Outcome::Deferred(after) => Action::requeue(after),
                _ => Action::await_change(),
            },
        )
    }
    .await;
    ctx.metrics.observe(
        NAME,
        started.elapsed(),
        result.as_ref().err().map(Error::category),
    );
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dra_node(name: &str, count: Option<&str>) -> Arc<NodeMeta> {
        let mut pairs = vec![(labels::DEPLOY_DRA_DRIVER, "true")];
        pairs.extend(count.map(|c| (labels::GPU_COUNT, c)));
        Arc::new(NodeMeta::new(name, &pairs))
    }

    /// A slice of `node`'s pool at `generation` of `count` slices with `gpus` whole GPUs
    /// (UUIDs `<node>-<first + i>`) and MIG devices on the parents `migs`.
    fn slice(
        node: &str,
        (generation, count): (i64, i64),
        gpus: std::ops::Range<usize>,
        migs: &[&str],
    ) -> Arc<SliceSummary> {
        let name = format!("{node}-{generation}-{}", gpus.start);
        let mut s = SliceSummary::new(&name, node, NVIDIA_GPU_DRIVER, (node, generation, count));
        s.devices.gpu = u32::try_from(gpus.len()).unwrap();
        s.devices.mig = u32::try_from(migs.len()).unwrap();
        s.physical_gpus = gpus.map(|i| format!("{node}-{i}")).collect();
        s.physical_gpus.extend(migs.iter().map(|p| (*p).to_owned()));
        s.physical_gpus.sort();
        s.physical_gpus.dedup();
        Arc::new(s)
    }

    fn refs(slices: &[Arc<SliceSummary>]) -> Vec<&SliceSummary> {
        slices.iter().map(AsRef::as_ref).collect()
    }

    #[test]
    fn a_node_is_ready_when_its_pool_is_complete_and_every_gpu_is_published() {
        let full = [slice("a", (1, 1), 0..8, &[])];
        assert_eq!(node_readiness(Some(8), &refs(&full)), Ok(()));
        assert_eq!(node_readiness(None, &refs(&full)), Ok(()), "no GFD count");
        assert_eq!(node_readiness(Some(8), &[]), Err(NotReady::NoSlice));
        let short = [slice("a", (1, 1), 0..2, &[])];
        assert_eq!(
            node_readiness(Some(8), &refs(&short)),
            Err(NotReady::GpusMissing {
                published: 2,
                expected: Some(8)
            })
        );
        let empty = [slice("a", (1, 1), 0..0, &[])];
        assert_eq!(
            node_readiness(None, &refs(&empty)).unwrap_err().to_string(),
            "0 GPUs published"
        );
    }

    #[test]
    fn mig_devices_count_their_parent_gpus_once() {
        let mixed = [slice("a", (1, 1), 0..2, &["P1", "P1", "P2"])];
        assert_eq!(mixed[0].physical_gpus.len(), 4);
        assert_eq!(node_readiness(Some(4), &refs(&mixed)), Ok(()));
        assert!(node_readiness(Some(5), &refs(&mixed)).is_err());
    }

    #[test]
    fn only_the_newest_generation_counts_and_it_must_be_complete() {
        let updating = [slice("a", (1, 1), 0..8, &[]), slice("a", (2, 2), 0..4, &[])];
        assert_eq!(
            node_readiness(Some(8), &refs(&updating)),
            Err(NotReady::PoolIncomplete {
                present: 1,
                expected: 2
            })
        );
        assert_eq!(
            NotReady::PoolIncomplete {
                present: 1,
                expected: 2
            }
            .to_string(),
            "pool incomplete: 1 of 2 slices"
        );
        let done = [
            slice("a", (1, 1), 0..8, &[]),
            slice("a", (2, 2), 0..4, &[]),
            slice("a", (2, 2), 4..8, &[]),
        ];
        assert_eq!(node_readiness(Some(8), &refs(&done)), Ok(()));
        let mut other = (*slice("a", (1, 1), 0..8, &[])).clone();
        other.driver = "other.example.com".to_owned();
        assert_eq!(node_readiness(None, &[&other]), Err(NotReady::NoSlice));
    }

    #[test]
    fn the_summary_counts_dra_nodes_and_names_the_first_not_ready() {
        let plugin_node = Arc::new(NodeMeta::new("p", &[(labels::GPU_PRESENT, "true")]));
        let none = summarize(std::slice::from_ref(&plugin_node), &[]);
        assert!(none.status);
        assert_eq!(none.reason, "NoDRANodes");
        let nodes = vec![
            plugin_node,
            dra_node("a", Some("8")),
            dra_node("b", Some("8")),
            dra_node("c", None),
            dra_node("d", Some("2")),
        ];
        let slices = vec![
            slice("a", (1, 1), 0..8, &[]),
            slice("b", (1, 1), 0..2, &[]),
            slice("d", (3, 2), 0..2, &[]),
        ];
        let summary = summarize(&nodes, &slices);
        assert!(!summary.status);
        assert_eq!(summary.reason, "DRANodesNotPublished");
        assert_eq!(
            summary.message,
            "DRA nodes ready: 1/4; not ready: b (2 of 8 GPUs published); \
             c (no ResourceSlice for gpu.nvidia.com); d (pool incomplete: 1 of 2 slices)"
        );
        let ready = summarize(&nodes[..2], &slices);
        assert!(ready.status);
        assert_eq!(ready.reason, "AllDRANodesPublished");
        assert_eq!(ready.message, "DRA nodes ready: 1/1");
    }

    #[test]
    fn at_most_five_nodes_are_named() {
        let nodes: Vec<Arc<NodeMeta>> = (0..8)
            .map(|i| dra_node(&format!("n{i}"), Some("1")))
            .collect();
        let summary = summarize(&nodes, &[]);
        assert!(
            summary
                .message
                .starts_with("DRA nodes ready: 0/8; not ready: n0 (")
        );
        assert_eq!(summary.message.matches("no ResourceSlice").count(), 5);
    }
}
