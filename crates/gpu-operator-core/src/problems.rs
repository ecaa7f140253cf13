//! Which nodes an operand is not ready on, and why: the first few, found from the DaemonSet's pods
//! (listed only while it is not ready) and the node cache (nodes that should have a pod but
//! have none). Bounded, so the summary fits in the ClusterPolicy at any fleet size.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::{
    apps::v1::DaemonSet,
    core::v1::{Node, Pod},
};
use kube::{Api, ResourceExt as _, api::ListParams, core::PartialObjectMeta};

use crate::{Error, facts::matches_selector};

/// One node the operand is not ready on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeProblem {
    /// Node name.
    pub node: String,
    /// What is wrong, such as `image pull failed (ErrImagePull)`.
    pub reason: String,
}

/// Why `pod` is not ready, or `None` if it is.
pub fn pod_problem(pod: &Pod) -> Option<String> {
    let status = pod.status.as_ref()?;
    let ready = status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    if ready {
        return None;
    }
    let waiting = status
        .init_container_statuses
        .iter()
        .flatten()
        .chain(status.container_statuses.iter().flatten())
        .find_map(|c| {
            let waiting = c.state.as_ref()?.waiting.as_ref()?;
            Some((
                c.name.clone(),
                waiting.reason.clone().unwrap_or_default(),
                c.restart_count,
            ))
        });
    if let Some((container, reason, restarts)) = waiting {
        return Some(match reason.as_str() {
            "ErrImagePull" | "ImagePullBackOff" | "InvalidImageName" => {
                format!("image pull failed ({reason}) in container {container}")
            }
            "CrashLoopBackOff" => {
                format!("container {container} crash-looping ({restarts} restarts)")
            }
            "" => format!("container {container} waiting"),
            other => format!("container {container} waiting ({other})"),
        });
    }
    let unschedulable = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False");
    Some(match (status.phase.as_deref(), unschedulable) {
        (_, Some(c)) => format!(
            "pod not scheduled: {}",
            c.message.clone().unwrap_or_default()
        ),
        (Some("Pending"), None) => "pod pending".to_owned(),
        (Some("Failed"), None) => "pod failed".to_owned(),
        _ => "pod not ready".to_owned(),
    })
}

/// The first `limit` nodes `ds` is not ready on, with their reasons.
pub async fn problem_nodes(
    pods: &Api<Pod>,
    ds: &DaemonSet,
    nodes: &[std::sync::Arc<PartialObjectMeta<Node>>],
    limit: usize,
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
    let mut problems = Vec::new();
    let mut with_pod = BTreeSet::new();
    let mut params = ListParams::default().labels(&selector).limit(500);
    loop {
        let page = pods.list(&params).await.map_err(Error::kube(format!(
            "listing pods of DaemonSet {}",
            ds.name_any()
        )))?;
        for pod in &page.items {
            let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
            if let Some(node) = &node {
                with_pod.insert(node.clone());
            }
            if problems.len() < limit
                && let Some(reason) = pod_problem(pod)
            {
                problems.push(NodeProblem {
                    node: node.unwrap_or_else(|| format!("(pod {})", pod.name_any())),
                    reason,
                });
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(status: &serde_json::Value) -> Pod {
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
}
