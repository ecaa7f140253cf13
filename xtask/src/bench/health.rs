//! The GPU health step of a bench run (`--health`): every GPU node's health agent reports, then
//! polls again, on a fleet whose GPUs are all healthy. Each report runs the agent's own code
//! (`gpu_operator_validator::health::agent::{evaluate, write}`: the tracker, the conditions, the
//! resourceVersion-guarded write of `nodes/status` and the summary annotation) on a healthy
//! reading of the node's `nvidia.com/gpu.count` GPUs, so the simulation stops below NVML, as the
//! fake library does in the e2e. The agents write under a ServiceAccount of their own, so the
//! audit log tells their writes from the operator's.
//!
//! It runs on the converged fleet, right after the steady window and before the patch series
//! starts rollouts. Measured: the agents' writes on the first report and on the next poll (the
//! claim: 0), the operator's writes while the reports arrive (its `NodesHealthy` condition
//! counting them) and in a steady window after, and the operator's RSS before and after.

use std::{
    path::Path,
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};
use futures::{StreamExt as _, TryStreamExt as _, stream};
use gpu_operator_api::{ClusterPolicy, conditions::NODES_HEALTHY};
use gpu_operator_harness::{
    access::client_for,
    operator::{Operator, service_account_kubeconfig_from},
};
use gpu_operator_health::{condition::Tracker, reading::NodeReading};
use gpu_operator_validator::health::agent::{GPU_COUNT_LABEL, evaluate, write};
use k8s_openapi::{api::core::v1::Node, jiff::Timestamp};
use kube::{Api, ResourceExt as _, api::ListParams};
use serde::Serialize;

use super::{proc_stats::status_mib, report::Writes};

/// The agents' ServiceAccount (and so their audit-log user).
pub const AGENT_ACCOUNT: &str = "gpu-health-bench";
/// Agents reporting at once (a fleet's agents start within a DaemonSet rollout, not together).
const CONCURRENT: usize = 32;

/// What the health step measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct HealthRun {
    /// GPU nodes whose agent reported.
    pub nodes: u32,
    /// First report of every node until the ClusterPolicy counted them all healthy.
    pub reported_s: Option<f64>,
    /// The agents' writes on their first report.
    pub agent_first: Writes,
    /// The agents' writes on the next poll and in the steady window after it (expected 0).
    pub agent_again: Writes,
    /// The operator's writes while the reports arrived.
    pub operator_reports: Writes,
    /// The operator's writes from the next poll to the end of the steady window (expected 0).
    pub operator_steady: Writes,
    /// Length of that window.
    pub steady_s: u64,
    /// The operator's resident memory before the first report and after the window, MiB.
    pub rss_before_mib: Option<f64>,
    /// See `rss_before_mib`.
    pub rss_after_mib: Option<f64>,
    /// The `NodesHealthy` message at the end.
    pub nodes_healthy: String,
}

/// The time marks of the step: first report, all counted, end of the steady window.
pub type Window = (Timestamp, Timestamp, Timestamp);

/// One simulated agent: its node, the GPUs the node advertises, and its tracker.
struct Agent {
    node: String,
    gpus: u32,
    tracker: Tracker,
}

impl Agent {
    /// One poll as the agent does it, on a healthy reading; returns the conditions written.
    async fn poll(&mut self, nodes: &Api<Node>) -> anyhow::Result<usize> {
        let reading = Ok(NodeReading::healthy(self.gpus));
        let (_, desired) = evaluate(
            &mut self.tracker,
            &reading,
            Some(self.gpus),
            Timestamp::now(),
        );
        let (written, _) = write(nodes, &self.node, &desired, None)
            .await
            .with_context(|| format!("the agent of {}", self.node))?;
        Ok(written)
    }
}

/// Every agent polls once; returns the conditions written.
async fn round(agents: &mut [Agent], nodes: &Api<Node>) -> anyhow::Result<usize> {
    stream::iter(agents.iter_mut())
        .map(|agent| agent.poll(nodes))
        .buffer_unordered(CONCURRENT)
        .try_fold(0, async |sum, n| Ok(sum + n))
        .await
}

/// Runs the step on the cluster of the admin `client`; returns the window marks and the
/// agents' audit-log user.
pub async fn run(
    kubeconfig: &Path,
    client: &kube::Client,
    operator: &mut Operator,
    policy: &str,
    steady: Duration,
    dir: &Path,
    out: &mut HealthRun,
) -> anyhow::Result<(Window, String)> {
    let (agent_kubeconfig, user) = service_account_kubeconfig_from(
        kubeconfig,
        client,
        super::run::NAMESPACE,
        AGENT_ACCOUNT,
        "cluster-admin",
        dir,
    )
    .await?;
    let nodes: Api<Node> = Api::all(client_for(&agent_kubeconfig).await?);
    let mut agents: Vec<Agent> = Api::<Node>::all(client.clone())
        .list_metadata(&ListParams::default().labels(GPU_COUNT_LABEL))
        .await?
        .items
        .into_iter()
        .filter_map(|node| {
            let gpus = node.labels().get(GPU_COUNT_LABEL)?.parse().ok()?;
            Some(Agent {
                node: node.name_any(),
                gpus,
                tracker: Tracker::default(),
            })
        })
        .collect();
    out.nodes = u32::try_from(agents.len())?;
    let policies: Api<ClusterPolicy> = Api::all(client.clone());
    let pid = operator.pid();
    out.rss_before_mib = status_mib(pid, "VmRSS");
    let from = Timestamp::now();
    let started = Instant::now();
    let written = round(&mut agents, &nodes).await?;
    eprintln!(
        "    health: {} agents reported, {written} conditions written in {:.1} s",
        agents.len(),
        started.elapsed().as_secs_f64()
    );
    let all = format!("{n}/{n} GPU nodes report healthy GPUs", n = agents.len());
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let message = nodes_healthy(&policies, policy).await?;
        if message.starts_with(&all) {
            break;
        }
        if !operator.is_running() || Instant::now() > deadline {
            bail!("the operator did not count every node healthy (NodesHealthy: {message:?})");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    out.reported_s = Some(started.elapsed().as_secs_f64());
    let counted = Timestamp::now();
    let again = round(&mut agents, &nodes).await?;
    tokio::time::sleep(steady).await;
    let to = Timestamp::now();
    out.steady_s = steady.as_secs();
    out.rss_after_mib = status_mib(pid, "VmRSS");
    out.nodes_healthy = nodes_healthy(&policies, policy).await?;
    eprintln!(
        "    health: counted after {:.1} s; the next poll wrote {again} conditions",
        out.reported_s.unwrap_or_default()
    );
    Ok(((from, counted, to), user))
}

/// The ClusterPolicy's `NodesHealthy` message (empty when it has none yet).
async fn nodes_healthy(policies: &Api<ClusterPolicy>, name: &str) -> anyhow::Result<String> {
    let policy = policies.get(name).await?;
    Ok(policy
        .status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .find(|c| c.type_ == NODES_HEALTHY)
        .map(|c| c.message.clone())
        .unwrap_or_default())
}

/// The Markdown line of a run's health step.
pub fn line(health: &HealthRun) -> String {
    let mib = |m: Option<f64>| m.map_or_else(|| "—".to_owned(), |m| format!("{m:.1} MiB"));
    format!(
        "- health: {} GPU nodes' agents reported healthy, counted by the operator after {}; \
         agents' writes: first report {} ({}), next poll and {} s after: {}; operator's writes \
         while reports arrived: {} ({}{}), then: {}{}; operator RSS {} before, {} after; \
         NodesHealthy: {}",
        health.nodes,
        health
            .reported_s
            .map_or_else(|| "—".to_owned(), |s| format!("{s:.1} s")),
        health.agent_first.total(),
        health.agent_first.summary_by_resource(),
        health.steady_s,
        health.agent_again.total(),
        health.operator_reports.total(),
        health.operator_reports.summary_by_resource(),
        writers(&health.operator_reports),
        health.operator_steady.total(),
        writers(&health.operator_steady),
        mib(health.rss_before_mib),
        mib(health.rss_after_mib),
        health.nodes_healthy,
    )
}

/// `; status by writer: gpu-operator/status 2`, or nothing when no status was written.
fn writers(writes: &Writes) -> String {
    if writes.status_by_manager.is_empty() {
        return String::new();
    }
    let by: Vec<String> = writes
        .status_by_manager
        .iter()
        .map(|(m, n)| format!("{m} {n}"))
        .collect();
    format!("; status by writer: {}", by.join(", "))
}
