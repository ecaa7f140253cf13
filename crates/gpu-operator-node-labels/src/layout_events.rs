//! Says on the Node why its GPU clients are not scheduled yet: one Event (reason
//! `WaitingForMIGLayout`, about the Node, so `kubectl describe node` shows it) naming the node,
//! the MIG layout it asks for, the state the MIG manager reports and `success`, the state it
//! waits for. Normal while the MIG manager works; Warning once it reports `failed`.
//!
//! A layout the MIG manager's configuration lacks (the ConfigMap `migManager.config.name` names,
//! else the operator's `default-mig-parted-config`) is a Warning of its own (reason
//! `MIGConfigNotFound`) naming the node, the label and the closest valid names: the MIG manager
//! would only answer `failed`. Without a ConfigMap of its own, NVIDIA's MIG manager generates its
//! layouts from the GPUs it finds, names the default ConfigMap also has, so a name the default
//! lacks is one it lacks too (the reverse need not hold: `all-1g.5gb` is in the default, for
//! A100-40GB, and not among an H100's). A custom ConfigMap that is missing or invalid is
//! `MIGManagerReady`'s to report; the node's layout is not checked then.
//!
//! Published when a node starts waiting and each time what it waits on changes (the layout, the
//! state), never on a reconcile that finds the same wait: a node label change or the hourly
//! resync wakes the labeller without a new Event. The memory is this process's (a new leader
//! says it once more) and holds only the nodes waiting now.

use std::{
    collections::BTreeMap,
    sync::{Mutex, PoisonError},
};

use gpu_operator_api::{ClusterPolicySpec, labels};
use gpu_operator_core::Context;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::{
    events::{Event, EventType},
    reflector::ObjectRef,
};

use crate::mig_layout::{self, LayoutWait};

/// Reason of the Event of a node waiting for its layout.
pub const REASON: &str = "WaitingForMIGLayout";
/// Reason of the Event of a node asking for a layout the MIG manager's configuration lacks.
pub const NOT_FOUND: &str = "MIGConfigNotFound";
/// The key of a layouts ConfigMap the MIG manager reads.
const LAYOUTS_KEY: &str = "config.yaml";

/// The waits already published, by node.
#[derive(Debug, Default)]
pub struct LayoutEvents(Mutex<BTreeMap<String, LayoutWait>>);

impl LayoutEvents {
    /// Records that `node` waits as `wait` (`None`: not at all) and returns whether that is new
    /// (so worth an Event). A node that stops waiting is forgotten.
    pub fn first_seen(&self, node: &str, wait: Option<&LayoutWait>) -> bool {
        let mut published = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(wait) = wait else {
            published.remove(node);
            return false;
        };
        if published.get(node) == Some(wait) {
            return false;
        }
        published.insert(node.to_owned(), wait.clone());
        true
    }
}

/// Publishes the Event of `wait` about `node`; a refusal is logged, not retried (the wait is
/// in the log line of every reconcile that finds it new, too).
pub async fn publish(ctx: &Context, policy: &ClusterPolicySpec, node: &str, wait: &LayoutWait) {
    let (reason, message) = match unknown_layout(ctx, policy, node, wait) {
        Some(message) => (NOT_FOUND, message),
        None => (REASON, wait.message(node)),
    };
    if reason == NOT_FOUND {
        tracing::warn!(node, layout = %wait.layout, "{message}");
    } else {
        tracing::info!(node, layout = %wait.layout, state = ?wait.state, "{message}");
    }
    let event = Event {
        type_: if wait.failed() || reason == NOT_FOUND {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: reason.to_owned(),
        note: Some(message),
        action: "HoldDeployLabels".to_owned(),
        secondary: None,
    };
    ctx.one_off_events.publish_on_node(node, &event).await;
}

/// The report of `wait`'s layout when the MIG manager's configuration lacks it; `None` when it
/// has it or the configuration cannot be read here.
fn unknown_layout(
    ctx: &Context,
    policy: &ClusterPolicySpec,
    node: &str,
    wait: &LayoutWait,
) -> Option<String> {
    let custom = policy
        .mig_manager
        .as_ref()
        .and_then(|m| m.config.as_ref())
        .and_then(|c| c.name.as_deref())
        .filter(|name| !name.is_empty());
    let (source, known) = match custom {
        Some(name) => {
            let map = ctx
                .stores
                .config_maps
                .get(&ObjectRef::<ConfigMap>::new(name).within(&ctx.namespace))?;
            let text = map.data.as_ref()?.get(LAYOUTS_KEY)?;
            (name, gpu_operator_mig_manager::layouts(text).ok()?)
        }
        None => (
            gpu_operator_mig_manager::DEFAULT_CONFIG,
            gpu_operator_mig_manager::default_layouts()
                .into_iter()
                .collect(),
        ),
    };
    let closest = mig_layout::closest_layouts(&wait.layout, known.iter().map(String::as_str))?;
    Some(format!(
        "node {node} asks for MIG layout {layout} ({key}={layout}), which ConfigMap {source} \
         (key {LAYOUTS_KEY}) does not define, so the MIG manager cannot apply it and the node's \
         GPU clients stay held back: set {key} to a layout it defines, such as {closest}",
        layout = wait.layout,
        key = labels::MIG_CONFIG,
        closest = closest.join(", "),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait(layout: &str, state: Option<&str>) -> LayoutWait {
        LayoutWait {
            layout: layout.to_owned(),
            state: state.map(str::to_owned),
            held: vec!["nvidia.com/gpu.deploy.device-plugin".to_owned()],
        }
    }

    #[test]
    fn a_wait_is_published_once_until_it_changes_or_ends() {
        let events = LayoutEvents::default();
        let pending = wait("all-1g.10gb", Some("pending"));
        assert!(events.first_seen("a", Some(&pending)));
        assert!(!events.first_seen("a", Some(&pending)), "same wait");
        assert!(events.first_seen("b", Some(&pending)), "per node");
        assert!(events.first_seen("a", Some(&wait("all-1g.10gb", Some("failed")))));
        assert!(events.first_seen("a", Some(&wait("all-balanced", Some("failed")))));
        assert!(!events.first_seen("a", None), "no wait, no Event");
        assert!(
            events.first_seen("a", Some(&pending)),
            "a wait that comes back is published again"
        );
    }
}
