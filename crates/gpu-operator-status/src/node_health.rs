//! Sums up the GPU health agents' reports (`GPUHealthy`, carried in each GPU node's summary
//! annotation with the validator's conditions) into the ClusterPolicy condition `NodesHealthy`:
//! how many GPU nodes are unhealthy, the first few with their fault class, and how many cannot
//! read their GPUs. Informational: it does not gate `Ready` (a fault is the hardware's, not the
//! operator's), and it never acts on a node; engines such as Node Health Check do.

use std::{collections::BTreeMap, fmt::Write as _, sync::Arc};

use gpu_operator_api::{
    conditions::{NODES_HEALTHY, node},
    labels, node_validation,
};
use gpu_operator_core::{
    cache::node_meta::NodeMeta,
    report::{conditions::Desired, problems::PROBLEM_NODES},
};

/// `GPUHealthy`'s reason when the agent cannot read the GPUs.
const HEALTH_UNKNOWN: &str = "HealthUnknown";

/// What the reports say.
#[derive(Debug, PartialEq, Eq)]
pub struct Health {
    /// The `NodesHealthy` condition.
    pub condition: Desired,
    /// Unhealthy GPU nodes by fault class (the `GPUHealthy` reason).
    pub unhealthy_by_reason: BTreeMap<String, usize>,
}

/// The `NodesHealthy` condition and the counts for `nodes`. Pure.
pub fn summarize(nodes: &[Arc<NodeMeta>]) -> Health {
    let mut gpu_nodes: Vec<&NodeMeta> = nodes
        .iter()
        .map(AsRef::as_ref)
        .filter(|n| n.labels().get(labels::GPU_PRESENT) == Some("true"))
        .collect();
    gpu_nodes.sort_by(|a, b| a.name().cmp(b.name()));
    let (mut healthy, mut unknown, mut unreported) = (0, 0, 0);
    let mut unhealthy = Vec::new();
    let mut by_reason = BTreeMap::<String, usize>::new();
    for node in &gpu_nodes {
        let report = node
            .validation()
            .map(node_validation::decode)
            .unwrap_or_default();
        match report.get(node::GPU_HEALTHY) {
            None => unreported += 1,
            Some(e) if e.ready => healthy += 1,
            Some(e) if e.reason == HEALTH_UNKNOWN => unknown += 1,
            Some(e) => {
                *by_reason.entry(e.reason.clone()).or_default() += 1;
                unhealthy.push(format!("{} ({})", node.name(), e.reason));
            }
        }
    }
    let total = gpu_nodes.len();
    let mut counts = format!("{healthy}/{total} GPU nodes report healthy GPUs");
    if unknown > 0 {
        let _ = write!(
            counts,
            ", {unknown} cannot read their GPUs ({HEALTH_UNKNOWN})"
        );
    }
    if unreported > 0 {
        let _ = write!(counts, ", {unreported} without a health report");
    }
    let condition = if unhealthy.is_empty() {
        Desired::ok(NODES_HEALTHY, "NoUnhealthyNodes", counts)
    } else {
        let first: Vec<String> = unhealthy.iter().take(PROBLEM_NODES).cloned().collect();
        Desired::not_ok(
            NODES_HEALTHY,
            "UnhealthyNodes",
            format!(
                "{} unhealthy: {}; {counts}",
                unhealthy.len(),
                first.join(", ")
            ),
        )
    };
    Health {
        condition,
        unhealthy_by_reason: by_reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, report: Option<&str>) -> Arc<NodeMeta> {
        let meta = NodeMeta::new(name, &[(labels::GPU_PRESENT, "true")]);
        Arc::new(match report {
            Some(r) => meta.with_validation(r),
            None => meta,
        })
    }

    #[test]
    fn counts_unhealthy_nodes_by_fault_and_names_them() {
        let nodes = [
            node(
                "a",
                Some("GPUStackReady=True/StackReady,GPUHealthy=True/GPUsHealthy"),
            ),
            node("b", Some("GPUHealthy=False/DoubleBitECC")),
            node("c", Some("GPUHealthy=False/XidRebootNode")),
            node("d", Some("GPUHealthy=False/HealthUnknown")),
            node("e", Some("GPUStackReady=True/StackReady")),
            Arc::new(NodeMeta::new("cpu", &[])),
        ];
        let health = summarize(&nodes);
        assert!(!health.condition.status);
        assert_eq!(health.condition.reason, "UnhealthyNodes");
        assert_eq!(
            health.condition.message,
            "2 unhealthy: b (DoubleBitECC), c (XidRebootNode); 1/5 GPU nodes report healthy GPUs, \
             1 cannot read their GPUs (HealthUnknown), 1 without a health report"
        );
        assert_eq!(
            health.unhealthy_by_reason,
            BTreeMap::from([("DoubleBitECC".into(), 1), ("XidRebootNode".into(), 1)])
        );
    }

    #[test]
    fn no_faults_is_true_even_when_some_nodes_cannot_tell() {
        let health = summarize(&[
            node("a", Some("GPUHealthy=True/GPUsHealthy")),
            node("b", Some("GPUHealthy=False/HealthUnknown")),
        ]);
        assert!(health.condition.status);
        assert_eq!(health.condition.reason, "NoUnhealthyNodes");
        assert!(
            health
                .condition
                .message
                .contains("1 cannot read their GPUs")
        );
        assert!(health.unhealthy_by_reason.is_empty());
    }
}
