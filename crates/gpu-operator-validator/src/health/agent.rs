//! The agent's loop: poll the source on a blocking thread, fold the poll into the [`Tracker`],
//! and write the conditions that changed to the Node (resourceVersion-guarded strategic merge
//! patch of `nodes/status`, retried on conflict).

use std::time::Duration;

use gpu_operator_health::{
    condition::{self, Desired, Tracker},
    faults::{self, Fault},
    reading::NodeReading,
    report,
    source::{self, HealthSource},
    taint::UNHEALTHY_TAINT_KEY,
};
use k8s_openapi::{api::core::v1::Node, jiff::Timestamp};
use kube::{
    Api, Client,
    api::{Patch, PatchParams},
};
use serde_json::json;
use tracing::{info, warn};

use super::HealthConfig;
use crate::node_conditions::{ATTEMPTS, ReportError, is_conflict};

/// The label GFD writes with the node's GPU count.
pub const GPU_COUNT_LABEL: &str = "nvidia.com/gpu.count";
/// Field manager of the agent's writes.
pub const FIELD_MANAGER: &str = "gpu-operator/gpu-health";

/// One poll's outcome.
pub struct Poll {
    /// What was read, or why nothing could be.
    pub reading: Result<NodeReading, String>,
    /// How long the counters took to read (without the event wait).
    pub took: Duration,
}

/// The agent stopped.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// Reading or writing the Node failed.
    #[error(transparent)]
    Node(#[from] ReportError),
    /// The thread that polls NVML ended.
    #[error("the NVML poll thread ended: {0}")]
    PollThread(String),
}

/// Polls on a blocking thread; the source moves there and back.
async fn poll(
    source: Box<dyn HealthSource>,
    window: Duration,
) -> Result<(Box<dyn HealthSource>, Poll), AgentError> {
    tokio::task::spawn_blocking(move || {
        let mut source = source;
        let polled = source::poll(source.as_mut(), window);
        if polled.is_err() {
            // Nothing to wait on: keep the interval, so a missing library is not a busy loop.
            std::thread::sleep(window);
        }
        let took = polled.as_ref().map_or(Duration::ZERO, |(_, took)| *took);
        let reading = polled.map(|(reading, _)| reading).map_err(|e| e.0);
        (source, Poll { reading, took })
    })
    .await
    .map_err(|e| AgentError::PollThread(e.to_string()))
}

/// The node's boot time (`btime` of `/proc/stat`; the kernel is the host's).
pub fn boot_time(stat: &str) -> Option<Timestamp> {
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse::<i64>().ok())
        .and_then(|s| Timestamp::from_second(s).ok())
}

/// A tracker that carries over the node's XID condition of this boot (`/proc/stat`'s `btime`).
fn resume(node: Option<&Node>) -> Tracker {
    let existing = node
        .and_then(|n| n.status.as_ref()?.conditions.clone())
        .unwrap_or_default();
    let boot = std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| boot_time(&s))
        .unwrap_or(Timestamp::UNIX_EPOCH);
    Tracker::resume(&existing, boot)
}

/// What the conditions are, from a poll: the faults and the desired conditions.
pub fn evaluate(
    tracker: &mut Tracker,
    reading: &Result<NodeReading, String>,
    expected_gpus: Option<u32>,
    now: Timestamp,
) -> (Vec<Fault>, Vec<Desired>) {
    match reading {
        Err(why) => (Vec::new(), vec![Desired::unknown(why)]),
        Ok(reading) => {
            let state = faults::state_faults(reading, expected_gpus);
            let mut xids = Vec::new();
            for event in &reading.xids {
                match faults::xid_fault(event) {
                    Ok(fault) => xids.push(fault),
                    Err(Some(entry)) => {
                        info!(xid = event.xid, gpu = ?event.gpu, "{entry}: the application's or informational, not a node fault");
                    }
                    Err(None) => {
                        warn!(xid = event.xid, gpu = ?event.gpu, "XID not in NVIDIA's catalog: reported, not a node fault");
                    }
                }
            }
            let all: Vec<Fault> = state.iter().chain(&xids).cloned().collect();
            tracker.observe(reading, state, xids, now);
            (all, tracker.desired())
        }
    }
}

fn expected_gpus(node: &Node) -> Option<u32> {
    node.metadata
        .labels
        .as_ref()?
        .get(GPU_COUNT_LABEL)?
        .parse()
        .ok()
}

/// Adds or removes the unhealthy taint as `desired`'s `GPUHealthy` says; returns whether the
/// taints changed.
async fn taint(nodes: &Api<Node>, name: &str, desired: &[Desired]) -> Result<bool, ReportError> {
    let unhealthy = desired
        .iter()
        .any(|d| d.type_ == condition::GPU_HEALTHY && d.status == "False");
    let changed = crate::taint::rewrite(nodes, name, &params(), "tainting", |taints| {
        gpu_operator_health::taint::desired_taints(taints, unhealthy)
    })
    .await?;
    if changed {
        info!(
            node = name,
            unhealthy,
            "taint {UNHEALTHY_TAINT_KEY} {}",
            if unhealthy { "added" } else { "removed" }
        );
    }
    Ok(changed)
}

fn params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    }
}

/// Writes the conditions of `desired` that changed; returns how many were written and the GPU
/// count the node advertises (read on the way).
pub async fn write(
    nodes: &Api<Node>,
    name: &str,
    desired: &[Desired],
    recorder: Option<(&Client, &str)>,
) -> Result<(usize, Option<u32>), ReportError> {
    let api = |action| ReportError::api(action, name);
    for _ in 0..ATTEMPTS {
        let node = nodes.get(name).await.map_err(api("getting"))?;
        let expected = expected_gpus(&node);
        let existing = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default();
        let changed = condition::changed(&existing, desired, Timestamp::now());
        if changed.is_empty() {
            // Keeps the summary annotation, which the validator's checks also write, current.
            crate::summary::annotate(nodes, &node, &existing).await?;
            return Ok((0, expected));
        }
        let body = json!({
            "metadata": {"resourceVersion": node.metadata.resource_version},
            "status": {"conditions": changed},
        });
        match nodes
            .patch_status(name, &params(), &Patch::Strategic(body))
            .await
        {
            Ok(_) => {
                if let Some((client, namespace)) = recorder {
                    let uid = node.metadata.uid.as_deref();
                    let transitions = condition::transitions(&existing, &changed);
                    super::events::record(client, namespace, name, uid, &transitions).await;
                }
                crate::summary::annotate(
                    nodes,
                    &node,
                    &crate::summary::merged(&existing, &changed),
                )
                .await?;
                for c in &changed {
                    info!(node = name, condition = %c.type_, status = %c.status, reason = c.reason.as_deref().unwrap_or(""), "GPU health condition written");
                }
                return Ok((changed.len(), expected));
            }
            Err(e) if is_conflict(&e) => {}
            Err(e) => return Err(api("patching the status of")(e)),
        }
    }
    Err(ReportError::Conflicts(name.to_owned(), ATTEMPTS))
}

/// `--once`: `cfg.polls` polls (the first without waiting for events, the others each after
/// an interval's wait), each one's report on stdout, and the last one's write when a node and a
/// client are given.
pub async fn once(
    cfg: &HealthConfig,
    mut source: Box<dyn HealthSource>,
    client: Option<Client>,
) -> Result<(), AgentError> {
    let nodes = client.map(Api::<Node>::all);
    let node = match (&nodes, &cfg.node_name) {
        (Some(nodes), Some(name)) => Some(
            nodes
                .get(name)
                .await
                .map_err(ReportError::api("getting", name))?,
        ),
        _ => None,
    };
    let mut tracker = resume(node.as_ref());
    let expected = node.as_ref().and_then(expected_gpus);
    let mut desired = Vec::new();
    for n in 0..cfg.polls {
        let window = if n == 0 { Duration::ZERO } else { cfg.interval };
        let (returned, polled) = poll(source, window).await?;
        source = returned;
        let (faults, now) = evaluate(&mut tracker, &polled.reading, expected, Timestamp::now());
        desired = now;
        println!("# poll {}", n + 1);
        match &polled.reading {
            Ok(reading) => print!(
                "{}",
                report::render(reading, &faults, &desired, polled.took)
            ),
            Err(why) => println!("health unknown: {why}\n{desired:?}"),
        }
    }
    if let (Some(nodes), Some(name)) = (&nodes, &cfg.node_name) {
        let (written, _) = write(nodes, name, &desired, None).await?;
        println!("{written} condition(s) written to node {name}");
    }
    Ok(())
}

/// Polls until SIGTERM, writing changes to `NODE_NAME`.
pub async fn run(
    cfg: &HealthConfig,
    mut source: Box<dyn HealthSource>,
    client: Client,
    name: &str,
) -> Result<(), AgentError> {
    let nodes = Api::<Node>::all(client.clone());
    let node = nodes
        .get(name)
        .await
        .map_err(ReportError::api("getting", name))?;
    let mut tracker = resume(Some(&node));
    let mut expected = expected_gpus(&node);
    let mut exporter = match (cfg.dcgm_exporter_port, &cfg.namespace) {
        (Some(port), Some(namespace)) => Some(super::exporter::Exporter::new(
            Api::namespaced(client.clone(), namespace),
            name,
            port,
        )),
        _ => None,
    };
    let mut taint_synced = false;
    let mut stop = std::pin::pin!(crate::lifecycle::idle());
    info!(
        node = name,
        interval_s = cfg.interval.as_secs(),
        "GPU health agent polling"
    );
    loop {
        let polling = poll(source, cfg.interval);
        let (returned, polled) = tokio::select! {
            polled = polling => polled?,
            _ = &mut stop => return Ok(()),
        };
        source = returned;
        let mut reading = polled.reading;
        if let (Some(exporter), Ok(reading)) = (exporter.as_mut(), reading.as_mut()) {
            match exporter.xids().await {
                Ok(xids) => gpu_operator_health::dcgm::merge_events(&mut reading.xids, xids),
                Err(why) => reading
                    .other_unreadable
                    .push(format!("DCGM exporter ({why})")),
            }
        }
        let (_, desired) = evaluate(&mut tracker, &reading, expected, Timestamp::now());
        let recorder = cfg.namespace.as_deref().map(|ns| (&client, ns));
        match write(&nodes, name, &desired, recorder).await {
            Ok((written, count)) => {
                expected = count;
                // At start and on every change; with the taint off, one that was left is lifted.
                if written > 0 || !taint_synced {
                    let wanted: &[Desired] = if cfg.taint_unhealthy { &desired } else { &[] };
                    taint_synced = taint(&nodes, name, wanted)
                        .await
                        .inspect_err(|e| warn!(node = name, "{e}; retried next poll"))
                        .is_ok();
                }
            }
            Err(e) => warn!(
                node = name,
                "writing GPU health conditions: {e}; retried next poll"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boot_time_comes_from_btime() {
        let stat = "cpu  1 2 3\nintr 5\nbtime 1764230400\nprocesses 9\n";
        assert_eq!(boot_time(stat).unwrap().as_second(), 1_764_230_400);
        assert_eq!(boot_time("cpu 1\n"), None);
    }
}
