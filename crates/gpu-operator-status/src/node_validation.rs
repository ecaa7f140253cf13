//! Sums up what the validators report on each GPU node (their summary annotation, read from the
//! metadata-only Node cache) into one ClusterPolicy condition, `NodesValidated`: validated/total
//! GPU nodes per component and the first few nodes that are not validated, with the reason.
//! It informs; it does not gate `Ready` (the validator DaemonSet's readiness already does). The
//! same reconciler writes [`crate::node_health`]'s `NodesHealthy` from the same reports.

use std::{sync::Arc, time::Instant};

use gpu_operator_api::{
    ClusterPolicy,
    conditions::{NODES_VALIDATED, node},
    labels, node_validation,
};
use kube::{Resource as _, ResourceExt as _, runtime::controller::Action};

use gpu_operator_core::{
    Context, Error,
    cache::{labeller_wait, node_meta::NodeMeta},
    pipeline::{
        active,
        status_write::{self, Outcome},
    },
    report::{conditions::Desired, problems::PROBLEM_NODES},
};

/// Name of this reconciler (field manager suffix, metric label).
pub const NAME: &str = "node-validation";

/// Short names of the components in the message, by condition type.
const COMPONENTS: [(&str, &str); 5] = [
    (node::GPU_DRIVER_READY, "driver"),
    (node::GPU_TOOLKIT_READY, "toolkit"),
    (node::GPU_CUDA_READY, "cuda"),
    (node::GPU_DEVICE_PLUGIN_READY, "device plugin"),
    (node::GPU_STACK_READY, "stack"),
];

/// The `NodesValidated` condition for `nodes`. Pure.
pub fn summarize(nodes: &[Arc<NodeMeta>]) -> Desired {
    let mut gpu_nodes: Vec<&NodeMeta> = nodes
        .iter()
        .map(AsRef::as_ref)
        .filter(|n| n.labels().get(labels::GPU_PRESENT) == Some("true"))
        .collect();
    gpu_nodes.sort_by(|a, b| a.meta().name.cmp(&b.meta().name));
    let total = gpu_nodes.len();
    if total == 0 {
        return Desired::ok(NODES_VALIDATED, "NoGPUNodes", "no GPU nodes to validate");
    }
    let mut ready = [0usize; COMPONENTS.len()];
    // The last component, the whole stack, decides whether a node is validated.
    let stack = COMPONENTS.len() - 1;
    // Nodes whose validator reported a failure come before nodes with no report yet: they say why.
    let (mut failed, mut silent) = (Vec::new(), Vec::new());
    for node in &gpu_nodes {
        let report = node
            .validation()
            .map(node_validation::decode)
            .unwrap_or_default();
        for (i, (type_, _)) in COMPONENTS.iter().enumerate() {
            if report.get(*type_).is_some_and(|e| e.ready) {
                ready[i] += 1;
            }
        }
        if report.get(node::GPU_STACK_READY).is_some_and(|e| e.ready) {
            continue;
        }
        let why = COMPONENTS.iter().find_map(|(type_, name)| {
            report
                .get(*type_)
                .filter(|e| !e.ready)
                .map(|e| format!("{name}: {}", e.reason))
        });
        match why {
            Some(why) if failed.len() < PROBLEM_NODES => {
                failed.push(format!("{} ({why})", node.name_any()));
            }
            None if silent.len() < PROBLEM_NODES => {
                silent.push(format!("{} (no validator report yet)", node.name_any()));
            }
            _ => {}
        }
    }
    let problems: Vec<String> = failed
        .into_iter()
        .chain(silent)
        .take(PROBLEM_NODES)
        .collect();
    let counts: Vec<String> = COMPONENTS
        .iter()
        .zip(ready)
        .map(|((_, name), n)| format!("{name} {n}/{total}"))
        .collect();
    let counts = format!("GPU nodes validated: {}", counts.join(", "));
    let desired = if ready[stack] == total {
        Desired::ok(NODES_VALIDATED, "AllNodesValidated", counts)
    } else {
        Desired::not_ok(
            NODES_VALIDATED,
            "NodesNotValidated",
            format!("{counts}; not validated: {}", problems.join("; ")),
        )
    };
    desired.with_progress(ready[stack], total)
}

/// Writes the summary into the active ClusterPolicy.
pub async fn reconcile(policy: Arc<ClusterPolicy>, ctx: Arc<Context>) -> Result<Action, Error> {
    let started = Instant::now();
    let result = async {
        if !active::is_active(policy.as_ref(), &ctx.stores.policies.state()) {
            return Ok(Action::await_change());
        }
        if ctx
            .labeller_wait
            .should_wait(ctx.facts().gpu_candidates_unlabelled, Instant::now())
        {
            return Ok(Action::requeue(labeller_wait::POLL));
        }
        let nodes = ctx.stores.nodes.state();
        let summary = summarize(&nodes);
        let health = crate::node_health::summarize(&nodes);
        ctx.metrics.set_unhealthy_nodes(&health.unhealthy_by_reason);
        let mut action = Action::await_change();
        for desired in [&summary, &health.condition] {
            if let Outcome::Deferred(after) =
                status_write::write_gated(&ctx, policy.as_ref(), NAME, desired)
            {
                action = Action::requeue(after);
            }
        }
        Ok(action)
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

    fn node(name: &str, gpu: bool, annotation: Option<&str>) -> Arc<NodeMeta> {
        let labels: &[(&str, &str)] = if gpu {
            &[(labels::GPU_PRESENT, "true")]
        } else {
            &[]
        };
        let meta = NodeMeta::new(name, labels);
        Arc::new(match annotation {
            Some(report) => meta.with_validation(report),
            None => meta,
        })
    }

    const READY: &str = "GPUDriverReady=True/DriverValidated,GPUToolkitReady=True/ToolkitValidated,GPUCudaReady=True/CUDAValidated,GPUDevicePluginReady=True/PluginValidated,GPUStackReady=True/StackReady";

    #[test]
    fn all_validated_nodes_make_it_true_with_counts() {
        let d = summarize(&[node("a", true, Some(READY)), node("cpu", false, None)]);
        assert!(d.status);
        assert_eq!(
            d.message,
            "GPU nodes validated: driver 1/1, toolkit 1/1, cuda 1/1, device plugin 1/1, stack 1/1"
        );
    }

    #[test]
    fn the_first_failing_component_is_named_per_node() {
        let failing = "GPUDriverReady=True/DriverValidated,GPUToolkitReady=False/NvidiaSmiNotInjected,GPUStackReady=False/ToolkitNotReady";
        let no_cuda = "GPUDriverReady=True/DriverValidated,GPUToolkitReady=True/ToolkitValidated,GPUCudaReady=False/WorkloadFailed,GPUStackReady=False/CUDANotReady";
        let d = summarize(&[
            node("a", true, Some(READY)),
            node("b", true, Some(failing)),
            node("c", true, None),
            node("d", true, Some(no_cuda)),
        ]);
        assert!(!d.status);
        assert!(
            d.message.starts_with(
                "GPU nodes validated: driver 3/4, toolkit 2/4, cuda 1/4, device plugin 1/4, stack 1/4"
            ),
            "{}",
            d.message
        );
        assert!(
            d.message
                .contains("b (toolkit: NvidiaSmiNotInjected); d (cuda: WorkloadFailed); c (no validator report yet)"),
            "{}",
            d.message
        );
    }

    #[test]
    fn no_gpu_nodes_is_true() {
        assert_eq!(summarize(&[node("cpu", false, None)]).reason, "NoGPUNodes");
    }

    #[test]
    fn the_problem_list_is_bounded() {
        let nodes: Vec<_> = (0..50)
            .map(|i| node(&format!("n{i:02}"), true, None))
            .collect();
        let d = summarize(&nodes);
        assert_eq!(
            d.message.matches("no validator report yet").count(),
            PROBLEM_NODES
        );
    }
}
