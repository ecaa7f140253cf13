//! `--sandbox`: sandbox (virtual-machine) workloads on a third of the GPU nodes. Before the
//! ClusterPolicy is created the bench labels every third GPU node `nvidia.com/gpu.workload.config`
//! `vm-passthrough` or `vm-vgpu` (alternately; the bench's own writes, not the operator's), and the
//! policy gets `sandboxWorkloads.enabled` with the VFIO manager and the KubeVirt device plugin
//! (images in the spec). A run is ready once the container DaemonSets cover the container nodes
//! and the sandbox ones their VM nodes (the sandbox validator and device plugin every VM node, the
//! VFIO manager the passthrough ones), so its rollout writes per GPU node compare with a run of
//! the container stack alone.
//!
//! After the steady window, the relabel step moves up to 100 container nodes to `vm-passthrough`
//! and times it until the DaemonSets cover the new sets. The operator's part should be one patch of
//! each relabelled node (its gate labels) and its status; the pods that follow are the DaemonSet
//! controller's writes. Counted from the audit log: the operator's writes in that window by
//! resource, the nodes it patched, and the cluster's own writes (the bench's label patches, the
//! DaemonSet controller's pods, the scheduler's bindings and kwok's pod statuses share the admin
//! user).

use std::{
    collections::BTreeSet,
    time::{Duration, Instant},
};

use futures::{StreamExt as _, TryStreamExt as _, stream};
use gpu_operator_api::ClusterPolicy;
use gpu_operator_harness::{
    fleet::{KWOK_LABEL, NFD_NVIDIA_PCI},
    operator::Operator,
};
use k8s_openapi::{
    api::{apps::v1::DaemonSet, core::v1::Node},
    jiff::Timestamp,
};
use kube::{
    Api,
    api::{ListParams, Patch, PatchParams},
};
use serde::Serialize;
use serde_json::json;

use super::{report::Writes, run::CONTAINER_DAEMONSETS, upgrade::wait};

/// The node label that picks a GPU node's stack.
pub const WORKLOAD: &str = "nvidia.com/gpu.workload.config";
const PASSTHROUGH: &str = "vm-passthrough";
const VGPU: &str = "vm-vgpu";
/// The sandbox DaemonSets and whom they cover.
const VALIDATOR: &str = "nvidia-sandbox-validator";
const VFIO: &str = "nvidia-vfio-manager";
const KUBEVIRT_PLUGIN: &str = "nvidia-sandbox-device-plugin-daemonset";
/// Container nodes the relabel step moves to `vm-passthrough` (fewer on a smaller fleet).
const RELABELLED: usize = 100;
/// Label patches sent at once.
const CONCURRENT: usize = 16;
/// Quiet time after the DaemonSets settled, so the status writes that follow count.
const SETTLE: Duration = Duration::from_secs(10);

/// Which GPU nodes run which stack.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stacks {
    pub container: BTreeSet<String>,
    pub passthrough: BTreeSet<String>,
    pub vgpu: BTreeSet<String>,
}

impl Stacks {
    /// Every third of the `gpu_nodes` (by name) a VM node, `vm-passthrough` and `vm-vgpu` in
    /// turn; the rest containers.
    pub fn split(gpu_nodes: &[String]) -> Self {
        let mut names: Vec<&String> = gpu_nodes.iter().collect();
        names.sort();
        let mut stacks = Self::default();
        for (i, name) in names.into_iter().enumerate() {
            let set = match (i % 3, (i / 3) % 2) {
                (2, 0) => &mut stacks.passthrough,
                (2, _) => &mut stacks.vgpu,
                _ => &mut stacks.container,
            };
            set.insert(name.clone());
        }
        stacks
    }

    /// The VM nodes, both kinds.
    fn vm(&self) -> usize {
        self.passthrough.len() + self.vgpu.len()
    }

    /// Each DaemonSet and the number of nodes it should have a ready pod on.
    fn wanted(&self) -> Vec<(&'static str, usize)> {
        let mut wanted: Vec<(&'static str, usize)> = CONTAINER_DAEMONSETS
            .iter()
            .map(|name| (*name, self.container.len()))
            .collect();
        wanted.extend([
            (VALIDATOR, self.vm()),
            (KUBEVIRT_PLUGIN, self.vm()),
            (VFIO, self.passthrough.len()),
        ]);
        wanted
    }
}

/// What the sandbox profile measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SandboxRun {
    /// GPU nodes labelled `vm-passthrough` before the ClusterPolicy was created.
    pub passthrough: u32,
    /// GPU nodes labelled `vm-vgpu` then.
    pub vgpu: u32,
    /// GPU nodes left on the container stack then.
    pub container: u32,
    /// Container nodes the relabel step moved to `vm-passthrough`.
    pub relabelled: u32,
    /// From the first label patch until every DaemonSet covered its new set of nodes.
    pub settled_s: Option<f64>,
    /// The operator's writes from the first label patch until 10 s after the DaemonSets settled
    /// (lease renewals excluded); expected: one `patch nodes` per relabelled node, and status.
    pub writes: Writes,
    /// Distinct nodes among the operator's node writes in that window.
    pub nodes_written: u32,
    /// The admin user's writes in that window: the bench's label patches and what the cluster
    /// did (the DaemonSet controller's pods, the scheduler's bindings, kwok's pod statuses).
    pub cluster_writes: Writes,
}

/// `policy` with sandbox workloads on (`kubevirt` mode), the VFIO manager and the KubeVirt
/// device plugin enabled with their images in the spec (the operator's environment names the
/// container stack's images only).
pub fn enable(policy: &ClusterPolicy) -> anyhow::Result<ClusterPolicy> {
    let mut policy = policy.clone();
    let spec = &mut policy.spec;
    spec.sandbox_workloads = Some(serde_json::from_value(json!({"enabled": true}))?);
    spec.vfio_manager = Some(serde_json::from_value(json!({
        "enabled": true,
        "repository": "nvcr.io/nvidia", "image": "cuda", "version": "12.9.1-base-ubi9",
        "driverManager": {
            "repository": "nvcr.io/nvidia/cloud-native",
            "image": "k8s-driver-manager", "version": "v0.9.1"
        }
    }))?);
    spec.sandbox_device_plugin = Some(serde_json::from_value(json!({
        "enabled": true,
        "repository": "nvcr.io/nvidia", "image": "kubevirt-gpu-device-plugin",
        "version": "v1.4.0"
    }))?);
    Ok(policy)
}

/// Labels a third of the simulated GPU nodes as VM nodes (see [`Stacks::split`]).
pub async fn label_fleet(client: &kube::Client, out: &mut SandboxRun) -> anyhow::Result<Stacks> {
    let selector = format!("{}={},{NFD_NVIDIA_PCI}=true", KWOK_LABEL.0, KWOK_LABEL.1);
    let names: Vec<String> = Api::<Node>::all(client.clone())
        .list_metadata(&ListParams::default().labels(&selector))
        .await?
        .items
        .iter()
        .map(kube::ResourceExt::name_any)
        .collect();
    let stacks = Stacks::split(&names);
    label(client, &stacks.passthrough, (WORKLOAD, PASSTHROUGH)).await?;
    label(client, &stacks.vgpu, (WORKLOAD, VGPU)).await?;
    out.passthrough = u32::try_from(stacks.passthrough.len())?;
    out.vgpu = u32::try_from(stacks.vgpu.len())?;
    out.container = u32::try_from(stacks.container.len())?;
    eprintln!(
        "    sandbox: {} GPU nodes vm-passthrough, {} vm-vgpu, {} container",
        out.passthrough, out.vgpu, out.container
    );
    Ok(stacks)
}

/// Sets label `key` of `nodes` to `value`, a few patches at once.
pub async fn label(
    client: &kube::Client,
    nodes: &BTreeSet<String>,
    (key, value): (&str, &str),
) -> anyhow::Result<()> {
    let api: Api<Node> = Api::all(client.clone());
    let patch = json!({"metadata": {"labels": {key: value}}});
    stream::iter(nodes)
        .map(|name| {
            let (api, patch) = (&api, &patch);
            async move {
                api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
                    .await
                    .map(|_| ())
            }
        })
        .buffer_unordered(CONCURRENT)
        .try_collect::<()>()
        .await?;
    Ok(())
}

/// Whether every DaemonSet has a ready pod on each node of its stack (and only there); a
/// DaemonSet that should cover no node may be absent.
pub async fn covered(daemonsets: &Api<DaemonSet>, stacks: &Stacks) -> anyhow::Result<bool> {
    for (name, want) in stacks.wanted() {
        let want = i32::try_from(want)?;
        let Some(ds) = daemonsets.get_opt(name).await? else {
            if want == 0 {
                continue;
            }
            return Ok(false);
        };
        let status = ds.status.unwrap_or_default();
        if status.desired_number_scheduled != want || status.number_ready != want {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The relabel step: up to 100 container nodes to `vm-passthrough`, until the DaemonSets cover
/// the new sets; returns the window of the writes.
pub async fn relabel(
    client: &kube::Client,
    operator: &mut Operator,
    daemonsets: &Api<DaemonSet>,
    stacks: &mut Stacks,
    out: &mut SandboxRun,
) -> anyhow::Result<(Timestamp, Timestamp)> {
    let moved: BTreeSet<String> = stacks.container.iter().take(RELABELLED).cloned().collect();
    out.relabelled = u32::try_from(moved.len())?;
    let from = Timestamp::now();
    let started = Instant::now();
    label(client, &moved, (WORKLOAD, PASSTHROUGH)).await?;
    for node in &moved {
        stacks.container.remove(node);
    }
    stacks.passthrough.extend(moved);
    wait(
        operator,
        "the DaemonSets to follow the relabelled nodes",
        Duration::from_secs(900),
        async || covered(daemonsets, stacks).await,
    )
    .await?;
    out.settled_s = Some(started.elapsed().as_secs_f64());
    eprintln!(
        "    relabelled {} container nodes to {PASSTHROUGH}: the DaemonSets settled after {:.1} s",
        out.relabelled,
        started.elapsed().as_secs_f64()
    );
    tokio::time::sleep(SETTLE).await;
    Ok((from, Timestamp::now()))
}

/// The step's line in the Markdown report.
pub fn line(nodes: u32, sandbox: &SandboxRun) -> String {
    let writes = &sandbox.writes;
    let others: Vec<String> = writes
        .by_resource
        .iter()
        .filter(|(k, _)| {
            k.split_once(' ')
                .is_none_or(|(_, r)| r != "nodes" && r != super::report::STATUS_WRITES)
        })
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    format!(
        "- {nodes} nodes, sandbox: {} GPU nodes vm-passthrough, {} vm-vgpu, {} container; \
         relabelling {} container nodes to vm-passthrough settled in {}; operator writes: \
         {} node writes ({} nodes), {} status writes, other: {}; the cluster's (admin user): {}",
        sandbox.passthrough,
        sandbox.vgpu,
        sandbox.container,
        sandbox.relabelled,
        sandbox
            .settled_s
            .map_or_else(|| "—".to_owned(), |s| format!("{s:.1} s")),
        writes.of("nodes"),
        sandbox.nodes_written,
        writes.of(super::report::STATUS_WRITES),
        if others.is_empty() {
            "none".to_owned()
        } else {
            others.join(", ")
        },
        sandbox.cluster_writes.summary_by_resource(),
    )
}

#[cfg(test)]
mod tests {
    use gpu_operator_api::ClusterPolicySpec;

    use super::*;

    #[test]
    fn every_third_gpu_node_is_a_vm_node_of_each_kind_in_turn() {
        let names: Vec<String> = (0..12).map(|i| format!("gpu-{i:02}")).collect();
        let stacks = Stacks::split(&names);
        assert_eq!(stacks.container.len(), 8);
        assert_eq!(
            stacks.passthrough,
            ["gpu-02", "gpu-08"].map(str::to_owned).into()
        );
        assert_eq!(stacks.vgpu, ["gpu-05", "gpu-11"].map(str::to_owned).into());
        let wanted = stacks.wanted();
        assert!(wanted.contains(&(VFIO, 2)) && wanted.contains(&(VALIDATOR, 4)));
        assert!(wanted.contains(&("nvidia-device-plugin-daemonset", 8)));
    }

    #[test]
    fn the_policy_gets_the_sandbox_sections_and_the_line_splits_the_writes() {
        let policy = enable(&ClusterPolicy::new("p", ClusterPolicySpec::default())).unwrap();
        assert!(policy.spec.vfio_manager_enabled());
        assert!(policy.spec.sandbox_device_plugin_enabled());
        let mut run = SandboxRun {
            relabelled: 2,
            settled_s: Some(3.3),
            nodes_written: 2,
            ..SandboxRun::default()
        };
        run.writes.add("patch", "nodes", 200);
        run.writes.add("patch", "nodes", 200);
        run.writes.add("patch", "clusterpolicies/status", 200);
        let line = line(10, &run);
        assert!(
            line.contains("settled in 3.3 s; operator writes: 2 node writes (2 nodes), 1 status writes, other: none"),
            "{line}"
        );
    }
}
