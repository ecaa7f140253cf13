//! Sums up what the validators report on each GPU node (their summary annotation, read from the
//! metadata-only Node cache) into one ClusterPolicy condition, `NodesValidated`: validated/total
//! GPU nodes per component — the container stack's, the sandbox stack's on the nodes labelled
//! for VMs, and on the nodes whose GPUs the GPUCluster's DRA driver offers (gate
//! `nvidia.com/gpu.deploy.dra-driver=true`) the container stack without the device plugin check
//! (no device plugin runs there: `nvidia.com/gpu` is never allocatable, and the GPUCluster's
//! `DRAResourcesPublished` says whether the GPUs are offered) — and the first few nodes that are
//! not validated, with the reason.
//! It informs; it does not gate `Ready` (the validator DaemonSet's readiness already does). The
//! same reconciler writes [`crate::node_health`]'s `NodesHealthy` from the same reports.

use std::{collections::BTreeMap, sync::Arc, time::Instant};

use gpu_operator_api::{
    ClusterPolicy,
    conditions::{NODES_VALIDATED, node},
    labels,
    node_validation::{self, Entry},
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

/// A stack the validators check: the container stack (the operator validator) or the sandbox
/// stack (the sandbox validator, on the GPU nodes labelled for VMs).
struct Stack {
    /// What its nodes are called in the message.
    nodes: &'static str,
    /// Short names of its components in the message, by condition type.
    components: &'static [(&'static str, &'static str)],
    /// Its last count, named in the message: the nodes validated.
    validated: &'static str,
    /// The condition that sums the stack up on the node, if the validator writes one: its
    /// reason is the node's when no component failed.
    verdict: Option<&'static str>,
    /// Whether a node's report says the stack is validated there.
    is_validated: fn(&BTreeMap<String, Entry>) -> bool,
}

/// The container stack: validated where `GPUStackReady` is True.
const CONTAINER: Stack = Stack {
    nodes: "GPU nodes",
    components: &[
        (node::GPU_DRIVER_READY, "driver"),
        (node::GPU_TOOLKIT_READY, "toolkit"),
        (node::GPU_CUDA_READY, "cuda"),
        (node::GPU_DEVICE_PLUGIN_READY, "device plugin"),
    ],
    validated: "stack",
    verdict: Some(node::GPU_STACK_READY),
    is_validated: |report| ready(report, node::GPU_STACK_READY),
};

/// The sandbox stack: validated where the VFIO, vGPU manager and vGPU devices checks are True
/// (the sandbox validator passes the one a node's workload config does not need as
/// `NotRequired`), and the CC manager's too where it ran (`ccManager.enabled`).
const SANDBOX: Stack = Stack {
    nodes: "VM nodes",
    components: &[
        (node::GPU_VFIO_PCI_READY, "vfio-pci"),
        (node::GPU_VGPU_MANAGER_READY, "vgpu-manager"),
        (node::GPU_VGPU_DEVICES_READY, "vgpu-devices"),
        (node::GPU_CC_MANAGER_READY, "cc-manager"),
    ],
    validated: "sandbox",
    verdict: None,
    is_validated: |report| {
        ready(report, node::GPU_VFIO_PCI_READY)
            && ready(report, node::GPU_VGPU_MANAGER_READY)
            && ready(report, node::GPU_VGPU_DEVICES_READY)
            && report
                .get(node::GPU_CC_MANAGER_READY)
                .is_none_or(|e| e.ready)
    },
};

/// The container stack on DRA nodes: its checks but the device plugin's, validated where those
/// are True (the node's `GPUStackReady` includes the device plugin check, so it is not read).
const DRA_CONTAINER: Stack = Stack {
    nodes: "DRA nodes",
    components: &[
        (node::GPU_DRIVER_READY, "driver"),
        (node::GPU_TOOLKIT_READY, "toolkit"),
        (node::GPU_CUDA_READY, "cuda"),
    ],
    validated: "stack",
    verdict: None,
    is_validated: |report| {
        ready(report, node::GPU_DRIVER_READY)
            && ready(report, node::GPU_TOOLKIT_READY)
            && ready(report, node::GPU_CUDA_READY)
    },
};

fn ready(report: &BTreeMap<String, Entry>, type_: &str) -> bool {
    report.get(type_).is_some_and(|e| e.ready)
}

/// Whether `node` runs the sandbox stack: the node labeller gave it the sandbox validator's gate
/// (sandbox workloads on, the node labelled, or defaulted, for a VM workload type).
fn is_vm_node(node: &NodeMeta) -> bool {
    node.labels().get(labels::DEPLOY_SANDBOX_VALIDATOR) == Some("true")
}

/// Whether `node`'s GPUs are offered by the DRA driver (the node labeller gave it the kubelet
/// plugin's gate) rather than the device plugin.
fn is_dra_node(node: &NodeMeta) -> bool {
    node.labels().get(labels::DEPLOY_DRA_DRIVER) == Some("true")
}

/// One stack's counts over its nodes.
struct Tally {
    /// `name a/n` per component, then the validated count.
    counts: String,
    validated: usize,
    total: usize,
    /// Nodes whose validator reported a failure (with the first failing component), then nodes
    /// with no report yet, at most [`PROBLEM_NODES`].
    problems: Vec<String>,
}

fn tally(stack: &Stack, nodes: &[&NodeMeta]) -> Tally {
    let mut ready_by = vec![0usize; stack.components.len()];
    let mut validated = 0;
    let (mut failed, mut silent) = (Vec::new(), Vec::new());
    for node in nodes {
        let report = node
            .validation()
            .map(node_validation::decode)
            .unwrap_or_default();
        for (count, (type_, _)) in ready_by.iter_mut().zip(stack.components) {
            *count += usize::from(ready(&report, type_));
        }
        if (stack.is_validated)(&report) {
            validated += 1;
            continue;
        }
        let verdict = stack.verdict.map(|type_| (type_, stack.validated));
        let why = stack
            .components
            .iter()
            .copied()
            .chain(verdict)
            .find_map(|(type_, name)| {
                report
                    .get(type_)
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
    let total = nodes.len();
    let counts: Vec<String> = stack
        .components
        .iter()
        .zip(ready_by)
        // The CC manager's count only where it ran on some node.
        .filter(|((type_, _), n)| *type_ != node::GPU_CC_MANAGER_READY || *n > 0)
        .map(|((_, name), n)| format!("{name} {n}/{total}"))
        .chain([format!("{} {validated}/{total}", stack.validated)])
        .collect();
    Tally {
        counts: format!("{} validated: {}", stack.nodes, counts.join(", ")),
        validated,
        total,
        problems: failed.into_iter().chain(silent).collect(),
    }
}

/// The `NodesValidated` condition for `nodes`: the container stack on GPU nodes, the sandbox
/// stack on the VM nodes and the container stack without the device plugin on DRA nodes (neither
/// counted against the container stack), each only where it has nodes. Pure.
pub fn summarize(nodes: &[Arc<NodeMeta>]) -> Desired {
    let mut gpu_nodes: Vec<&NodeMeta> = nodes
        .iter()
        .map(AsRef::as_ref)
        .filter(|n| n.labels().get(labels::GPU_PRESENT) == Some("true"))
        .collect();
    if gpu_nodes.is_empty() {
        return Desired::ok(NODES_VALIDATED, "NoGPUNodes", "no GPU nodes to validate");
    }
    gpu_nodes.sort_by(|a, b| a.meta().name.cmp(&b.meta().name));
    let (vm_nodes, others): (Vec<&NodeMeta>, Vec<&NodeMeta>) =
        gpu_nodes.into_iter().partition(|n| is_vm_node(n));
    let (dra_nodes, container_nodes): (Vec<&NodeMeta>, Vec<&NodeMeta>) =
        others.into_iter().partition(|n| is_dra_node(n));
    let tallies: Vec<Tally> = [
        (&CONTAINER, container_nodes),
        (&SANDBOX, vm_nodes),
        (&DRA_CONTAINER, dra_nodes),
    ]
    .into_iter()
    .filter(|(_, nodes)| !nodes.is_empty())
    .map(|(stack, nodes)| tally(stack, &nodes))
    .collect();
    let counts: Vec<&str> = tallies.iter().map(|t| t.counts.as_str()).collect();
    let counts = counts.join("; ");
    let validated = tallies.iter().map(|t| t.validated).sum();
    let total = tallies.iter().map(|t| t.total).sum();
    let desired = if validated == total {
        Desired::ok(NODES_VALIDATED, "AllNodesValidated", counts)
    } else {
        let problems: Vec<&str> = tallies
            .iter()
            .flat_map(|t| &t.problems)
            .map(String::as_str)
            .take(PROBLEM_NODES)
            .collect();
        Desired::not_ok(
            NODES_VALIDATED,
            "NodesNotValidated",
            format!("{counts}; not validated: {}", problems.join("; ")),
        )
    };
    desired.with_progress(validated, total)
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

    fn vm_node(name: &str, annotation: Option<&str>) -> Arc<NodeMeta> {
        let meta = NodeMeta::new(
            name,
            &[
                (labels::GPU_PRESENT, "true"),
                (labels::DEPLOY_SANDBOX_VALIDATOR, "true"),
            ],
        );
        Arc::new(match annotation {
            Some(report) => meta.with_validation(report),
            None => meta,
        })
    }

    const PASSTHROUGH_READY: &str = "GPUVfioPciReady=True/VfioPciValidated,GPUVgpuManagerReady=True/NotRequired,GPUVgpuDevicesReady=True/NotRequired";

    #[test]
    fn vm_nodes_count_for_the_sandbox_stack_and_never_against_the_container_stack() {
        let d = summarize(&[
            node("a", true, Some(READY)),
            vm_node("vm1", Some(PASSTHROUGH_READY)),
        ]);
        assert!(d.status, "{}", d.message);
        assert_eq!(
            d.message,
            "GPU nodes validated: driver 1/1, toolkit 1/1, cuda 1/1, device plugin 1/1, stack 1/1; \
             VM nodes validated: vfio-pci 1/1, vgpu-manager 1/1, vgpu-devices 1/1, sandbox 1/1"
        );
        let unbound = "GPUVfioPciReady=False/NotBoundToVfio,GPUVgpuManagerReady=True/NotRequired";
        let cc_off = format!("{PASSTHROUGH_READY},GPUCcManagerReady=False/CCModeMismatch");
        let d = summarize(&[
            vm_node("vm1", Some(unbound)),
            vm_node("vm2", None),
            vm_node("vm3", Some(&cc_off)),
        ]);
        assert!(!d.status);
        assert_eq!(
            d.message,
            "VM nodes validated: vfio-pci 1/3, vgpu-manager 2/3, vgpu-devices 1/3, sandbox 0/3; \
             not validated: vm1 (vfio-pci: NotBoundToVfio); vm3 (cc-manager: CCModeMismatch); \
             vm2 (no validator report yet)"
        );
        assert_eq!(
            summarize(&[
                vm_node("vm1", Some(PASSTHROUGH_READY)),
                node("b", true, None)
            ])
            .message,
            "GPU nodes validated: driver 0/1, toolkit 0/1, cuda 0/1, device plugin 0/1, stack 0/1; \
             VM nodes validated: vfio-pci 1/1, vgpu-manager 1/1, vgpu-devices 1/1, sandbox 1/1; \
             not validated: b (no validator report yet)"
        );
    }

    #[test]
    fn a_node_whose_components_passed_so_far_is_named_with_the_stack_reason() {
        let pending = "GPUDriverReady=True/DriverValidated,GPUStackReady=False/ValidationPending";
        let d = summarize(&[node("a", true, None), node("b", true, Some(pending))]);
        assert!(
            d.message.ends_with(
                "not validated: b (stack: ValidationPending); a (no validator report yet)"
            ),
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

    #[test]
    fn dra_nodes_are_not_counted_against_the_device_plugin() {
        let dra = |name: &str, report: &str| {
            Arc::new(
                NodeMeta::new(
                    name,
                    &[
                        (labels::GPU_PRESENT, "true"),
                        (labels::DEPLOY_DRA_DRIVER, "true"),
                    ],
                )
                .with_validation(report),
            )
        };
        let no_plugin = "GPUDriverReady=True/DriverValidated,GPUToolkitReady=True/ToolkitValidated,GPUCudaReady=True/CUDAValidated,GPUDevicePluginReady=False/ResourceNotAdvertised,GPUStackReady=False/ResourceNotAdvertised";
        let d = summarize(&[node("a", true, Some(READY)), dra("d", no_plugin)]);
        assert!(d.status, "{}", d.message);
        assert_eq!(
            d.message,
            "GPU nodes validated: driver 1/1, toolkit 1/1, cuda 1/1, device plugin 1/1, stack 1/1; \
             DRA nodes validated: driver 1/1, toolkit 1/1, cuda 1/1, stack 1/1"
        );
        let no_cuda = "GPUDriverReady=True/DriverValidated,GPUToolkitReady=True/ToolkitValidated,GPUCudaReady=False/CUDAFailed";
        let d = summarize(&[dra("d", no_cuda)]);
        assert!(!d.status);
        assert_eq!(
            d.message,
            "DRA nodes validated: driver 1/1, toolkit 1/1, cuda 0/1, stack 0/1; \
             not validated: d (cuda: CUDAFailed)"
        );
    }
}
