//! Which nodes an operand is not ready on, and why: the first few, found from the DaemonSet's pods
//! and the node cache. Bounded, so the summary fits in the ClusterPolicy and its cost stays flat
//! at any fleet size: pods that are not running (pending, unschedulable, pulling an image, failed)
//! come from a field-selected list of at most `limit` pods; finding running pods that are not
//! ready (crash loops) and nodes that have no pod needs every pod of the DaemonSet, so that scan
//! runs only when the DaemonSet's counts say the pods that are not running do not explain it all,
//! and at most once per [`FULL_SCAN_EVERY`] per DaemonSet.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    sync::{Mutex, PoisonError},
    time::{Duration, Instant},
};

use k8s_openapi::api::apps::v1::DaemonSet;
use kube::{Api, ResourceExt as _, api::ListParams};

use crate::{
    Error,
    cache::{facts::matches_selector, node_meta::NodeMeta, pod_summary::PodSummary},
};

/// How many not-ready nodes a condition names.
pub const PROBLEM_NODES: usize = 5;
/// How often, per DaemonSet, every pod may be listed to find the rarer problems.
pub const FULL_SCAN_EVERY: Duration = Duration::from_secs(30);
/// Pods per page of the full scan (bounds the memory it takes: the response body is held whole).
const PAGE: u32 = 100;
/// Pods that are not running: pending (unscheduled, pulling an image, initialising) or failed.
const NOT_RUNNING: &str = "status.phase!=Running,status.phase!=Succeeded";

/// When each DaemonSet was last scanned in full, and what the scans that count pods found;
/// shared by the reconcilers.
#[derive(Debug, Default)]
pub struct ScanClock {
    last: Mutex<HashMap<String, Instant>>,
    counts: Mutex<HashMap<String, Counted>>,
}

/// A count found by a scan, for the template generation it was made for.
#[derive(Clone, Copy, Debug)]
struct Counted {
    generation: Option<i64>,
    count: i32,
}

impl ScanClock {
    /// Whether DaemonSet `name` may be scanned in full at `now`; if so, the scan is recorded.
    pub fn due(&self, name: &str, now: Instant) -> bool {
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        match last.get(name) {
            Some(at) if now.saturating_duration_since(*at) < FULL_SCAN_EVERY => false,
            _ => {
                last.insert(name.to_owned(), now);
                true
            }
        }
    }

    /// The count scan `name` found last, if it was made for template `generation`.
    pub fn last_count(&self, name: &str, generation: Option<i64>) -> Option<i32> {
        let counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        counts
            .get(name)
            .filter(|c| c.generation == generation)
            .map(|c| c.count)
    }

    /// Records what scan `name` counted for template `generation`.
    pub fn record_count(&self, name: &str, generation: Option<i64>, count: i32) {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        counts.insert(name.to_owned(), Counted { generation, count });
    }
}

/// One node the operand is not ready on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeProblem {
    /// Node name.
    pub node: String,
    /// What is wrong, such as `image pull failed (ErrImagePull)`.
    pub reason: String,
}

/// Why `pod` is not ready, or `None` if it is (or reports no status yet).
pub fn pod_problem(pod: &PodSummary) -> Option<String> {
    if pod.phase.is_none() && pod.conditions.is_empty() && pod.containers.is_empty() {
        return None;
    }
    let ready = pod
        .conditions
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    if ready {
        return None;
    }
    if let Some((container, reason)) = pod
        .containers
        .iter()
        .find_map(|c| c.waiting.as_deref().map(|reason| (c, reason)))
    {
        let name = &container.name;
        return Some(match reason {
            "ErrImagePull" | "ImagePullBackOff" | "InvalidImageName" => {
                format!("image pull failed ({reason}) in container {name}")
            }
            "CrashLoopBackOff" => format!(
                "container {name} crash-looping ({} restarts)",
                container.restart_count
            ),
            "" => format!("container {name} waiting"),
            other => format!("container {name} waiting ({other})"),
        });
    }
    let unschedulable = pod
        .conditions
        .iter()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False");
    Some(match (pod.phase.as_deref(), unschedulable) {
        (_, Some(c)) => format!(
            "pod not scheduled: {}",
            c.message.clone().unwrap_or_default()
        ),
        (Some("Pending"), None) => "pod pending".to_owned(),
        (Some("Failed"), None) => "pod failed".to_owned(),
        _ => "pod not ready".to_owned(),
    })
}

/// Up to `limit` nodes `ds` is not ready on, with their reasons. `clock` rate-limits the full
/// scan (see the module docs); between two full scans only pods that are not running are named.
pub async fn problem_nodes(
    pods: &Api<PodSummary>,
    ds: &DaemonSet,
    nodes: &[std::sync::Arc<NodeMeta>],
    limit: usize,
    clock: &ScanClock,
) -> Result<Vec<NodeProblem>, Error> {
    let spec = ds.spec.clone().unwrap_or_default();
    let selector: String = spec
        .selector
        .match_labels
        .unwrap_or_default()
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    let listing = || Error::kube(format!("listing pods of DaemonSet {}", ds.name_any()));
    let not_running = ListParams::default()
        .labels(&selector)
        .fields(NOT_RUNNING)
        .limit(u32::try_from(limit).unwrap_or(u32::MAX));
    let page = pods.list(&not_running).await.map_err(listing())?;
    let mut problems: Vec<NodeProblem> = page.items.iter().filter_map(problem_of).collect();
    problems.truncate(limit);
    if problems.len() >= limit
        || all_explained(ds, problems.len())
        || !clock.due(&ds.name_any(), Instant::now())
    {
        return Ok(problems);
    }
    let mut with_pod = BTreeSet::new();
    let mut params = ListParams::default().labels(&selector).limit(PAGE);
    loop {
        let page = pods.list(&params).await.map_err(listing())?;
        for pod in &page.items {
            if let Some(node) = &pod.node_name {
                with_pod.insert(node.clone());
            }
            if problems.len() < limit
                && let Some(problem) = problem_of(pod)
                && !problems.iter().any(|p| p.node == problem.node)
            {
                problems.push(problem);
            }
        }
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => break,
        }
    }
    let node_selector: BTreeMap<String, String> = spec
        .template
        .spec
        .and_then(|s| s.node_selector)
        .unwrap_or_default();
    for node in nodes {
        if problems.len() >= limit {
            break;
        }
        let name = node.name_any();
        if !with_pod.contains(&name) && matches_selector(node.labels(), &node_selector) {
            problems.push(NodeProblem {
                node: name,
                reason: "no pod on the node yet".to_owned(),
            });
        }
    }
    Ok(problems)
}

/// Whether the `found` pods that are not running account for every pod the DaemonSet's status
/// counts as not ready, and every node that should have a pod has one: then a full scan could
/// find nothing more.
fn all_explained(ds: &DaemonSet, found: usize) -> bool {
    let Some(status) = &ds.status else {
        return false;
    };
    let unready =
        usize::try_from(status.desired_number_scheduled - status.number_ready).unwrap_or(0);
    found >= unready && status.current_number_scheduled >= status.desired_number_scheduled
}

/// The problem of `pod` on its node, if it is not ready.
fn problem_of(pod: &PodSummary) -> Option<NodeProblem> {
    let reason = pod_problem(pod)?;
    let node = pod.node_name.clone();
    Some(NodeProblem {
        node: node.unwrap_or_else(|| format!("(pod {})", pod.name_any())),
        reason,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(status: &serde_json::Value) -> PodSummary {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "status": status})).unwrap()
    }

    #[test]
    fn ready_pods_have_no_problem() {
        assert_eq!(
            pod_problem(&pod(
                &json!({"conditions": [{"type": "Ready", "status": "True"}]})
            )),
            None
        );
    }

    #[test]
    fn reasons_name_image_pulls_crash_loops_and_scheduling() {
        let pull = pod(
            &json!({"phase": "Pending", "containerStatuses": [{"name": "plugin", "image": "x", "imageID": "", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "ImagePullBackOff"}}}]}),
        );
        assert_eq!(
            pod_problem(&pull).unwrap(),
            "image pull failed (ImagePullBackOff) in container plugin"
        );
        let crash = pod(
            &json!({"phase": "Running", "containerStatuses": [{"name": "plugin", "image": "x", "imageID": "", "ready": false, "restartCount": 7, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}),
        );
        assert_eq!(
            pod_problem(&crash).unwrap(),
            "container plugin crash-looping (7 restarts)"
        );
        let unscheduled = pod(
            &json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "message": "0/3 nodes are available"}]}),
        );
        assert_eq!(
            pod_problem(&unscheduled).unwrap(),
            "pod not scheduled: 0/3 nodes are available"
        );
        assert_eq!(
            pod_problem(&pod(&json!({"phase": "Pending"}))).unwrap(),
            "pod pending"
        );
    }

    #[test]
    fn a_count_stands_only_for_the_template_it_was_made_for() {
        let clock = ScanClock::default();
        assert_eq!(clock.last_count("driver/old-revision", Some(3)), None);
        clock.record_count("driver/old-revision", Some(3), 857);
        assert_eq!(clock.last_count("driver/old-revision", Some(3)), Some(857));
        assert_eq!(clock.last_count("driver/old-revision", Some(4)), None);
        assert_eq!(clock.last_count("toolkit/old-revision", Some(3)), None);
        clock.record_count("driver/old-revision", Some(4), 12);
        assert_eq!(clock.last_count("driver/old-revision", Some(4)), Some(12));
    }

    #[test]
    fn the_full_scan_runs_at_most_once_per_interval_per_daemonset() {
        let clock = ScanClock::default();
        let start = Instant::now();
        assert!(clock.due("plugin", start));
        assert!(!clock.due("plugin", start + Duration::from_secs(1)));
        assert!(
            clock.due("validator", start),
            "each DaemonSet has its own clock"
        );
        assert!(clock.due("plugin", start + FULL_SCAN_EVERY));
    }
}
