//! The driver upgrade step of a bench run (`--upgrade`): turn on `driver.upgradePolicy` with
//! `maxParallelUpgrades: 0` and `maxUnavailable: 25%`, wait until every GPU node is labelled
//! `upgrade-done`, bump `driver.version`, and time the upgrade until the `DriverUpgrade` condition
//! says every GPU node runs the new driver, sampling the operator's memory and CPU; its writes in
//! that window are counted from the audit log by the caller.

use std::time::{Duration, Instant};

use anyhow::bail;
use gpu_operator_api::{ClusterPolicy, conditions::DRIVER_UPGRADE};
use gpu_operator_harness::operator::Operator;
use k8s_openapi::{api::core::v1::Node, jiff::Timestamp};
use kube::{
    Api,
    api::{ListParams, Patch, PatchParams},
};
use serde::Serialize;
use serde_json::json;

use super::{
    proc_stats::{cpu_seconds, status_mib},
    report::Writes,
};

/// What the driver upgrade step measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct UpgradeRun {
    /// `driver.version` bumped until every GPU node runs the new driver.
    pub duration_s: Option<f64>,
    /// With `--pools`, the nodes of the one pool upgraded (otherwise every GPU node is).
    pub nodes: Option<u32>,
    /// The operator's writes in that time (lease renewals excluded).
    pub writes: Writes,
    /// The largest resident memory sampled during it, MiB.
    pub max_rss_mib: Option<f64>,
    /// CPU seconds during it.
    pub cpu_s: Option<f64>,
}

/// Runs the upgrade; returns when it is done with the window's start and end for the writes.
pub async fn run(
    client: &kube::Client,
    operator: &mut Operator,
    policy: &str,
    gpu_nodes: u32,
    ticks: f64,
    out: &mut UpgradeRun,
) -> anyhow::Result<(Timestamp, Timestamp)> {
    let policies: Api<ClusterPolicy> = Api::all(client.clone());
    let nodes: Api<Node> = Api::all(client.clone());
    let enable = json!({"spec": {"driver": {"upgradePolicy": {
        "autoUpgrade": true, "maxParallelUpgrades": 0, "maxUnavailable": "25%"
    }}}});
    policies
        .patch(policy, &PatchParams::default(), &Patch::Merge(&enable))
        .await?;
    let done = ListParams::default().labels("nvidia.com/gpu-driver-upgrade-state=upgrade-done");
    wait(
        operator,
        "every GPU node labelled upgrade-done",
        Duration::from_secs(900),
        async || Ok(nodes.list_metadata(&done).await?.items.len() >= gpu_nodes as usize),
    )
    .await?;
    let pid = operator.pid();
    let cpu_before = cpu_seconds(pid, ticks);
    let from = Timestamp::now();
    let started = Instant::now();
    let bump = json!({"spec": {"driver": {"repository": "nvcr.io/nvidia", "image": "driver", "version": "580.95.05"}}});
    let generation = policies
        .patch(policy, &PatchParams::default(), &Patch::Merge(&bump))
        .await?
        .metadata
        .generation;
    let all = format!("{gpu_nodes}/{gpu_nodes} GPU nodes on the current driver");
    let mut max_rss: Option<f64> = None;
    wait(
        operator,
        "the driver upgrade to finish",
        Duration::from_secs(3600),
        async || {
            if let Some(rss) = status_mib(pid, "VmRSS") {
                max_rss = Some(max_rss.map_or(rss, |m| m.max(rss)));
            }
            let policy = policies.get(policy).await?;
            let condition = policy
                .status
                .iter()
                .flat_map(|s| s.conditions.iter().flatten())
                .find(|c| c.type_ == DRIVER_UPGRADE)
                .cloned();
            Ok(condition.is_some_and(|c| {
                c.status == "True"
                    && c.observed_generation == generation
                    && c.message.starts_with(&all)
            }))
        },
    )
    .await?;
    out.duration_s = Some(started.elapsed().as_secs_f64());
    out.max_rss_mib = max_rss;
    out.cpu_s = cpu_seconds(pid, ticks).zip(cpu_before).map(|(a, b)| a - b);
    eprintln!(
        "    driver upgrade of {gpu_nodes} GPU nodes done after {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok((from, Timestamp::now()))
}

/// Checks about once a second until `check` says yes, the operator exits or `timeout` passes.
pub(super) async fn wait(
    operator: &mut Operator,
    what: &str,
    timeout: Duration,
    mut check: impl AsyncFnMut() -> anyhow::Result<bool>,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut next = started + Duration::from_secs(30);
    loop {
        if matches!(check().await, Ok(true)) {
            return Ok(());
        }
        if !operator.is_running() {
            bail!(
                "the operator exited while waiting for {what}; its log ends:\n{}",
                operator.log_tail()
            );
        }
        if started.elapsed() > timeout {
            bail!("timed out after {timeout:?} waiting for {what}");
        }
        if Instant::now() >= next {
            next += Duration::from_secs(30);
            eprintln!(
                "    … {:.0} s: waiting for {what}",
                started.elapsed().as_secs_f64()
            );
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The Markdown line of a run's upgrade.
#[expect(
    clippy::cast_precision_loss,
    reason = "request and node counts are small"
)]
pub fn line(nodes: u32, gpu_nodes: u32, upgrade: &UpgradeRun) -> String {
    let (upgraded, which) = match upgrade.nodes {
        Some(pool) => (pool, " of one NVIDIADriver pool"),
        None => (gpu_nodes, ""),
    };
    let per_node = upgrade.writes.total() as f64 / f64::from(upgraded.max(1));
    let resources: Vec<String> = upgrade
        .writes
        .by_resource
        .iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    format!(
        "- {nodes} nodes: driver upgrade of {upgraded} GPU nodes{which} (maxParallelUpgrades 0, maxUnavailable 25%) in {}; \
         {} writes, {per_node:.1} per node upgraded ({}); max RSS {}; CPU {}",
        upgrade
            .duration_s
            .map_or_else(|| "—".to_owned(), |s| format!("{s:.1} s")),
        upgrade.writes.total(),
        resources.join(", "),
        upgrade
            .max_rss_mib
            .map_or_else(|| "—".to_owned(), |m| format!("{m:.1} MiB")),
        upgrade
            .cpu_s
            .map_or_else(|| "—".to_owned(), |s| format!("{s:.1} s")),
    )
}
