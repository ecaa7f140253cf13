//! Says on the Node that its workload config label is not one NVIDIA's operator knows: with
//! sandbox workloads on, a `nvidia.com/gpu.workload.config` of another value than `container`,
//! `vm-passthrough` or `vm-vgpu` is read as `sandboxWorkloads.defaultWorkload` (NVIDIA's rule),
//! and one Warning Event (reason `InvalidWorkloadConfig`) about the Node names the value, what
//! the node runs instead and the fix. Once per node and value in this process: a reconcile that
//! finds the same value says nothing; a node whose label becomes valid is forgotten.

use std::{
    collections::BTreeMap,
    sync::{Mutex, PoisonError},
};

use gpu_operator_api::{ClusterPolicySpec, labels, spec::WorkloadConfig};
use gpu_operator_core::Context;
use kube::runtime::events::{Event, EventType};

/// Reason of the Event.
pub const REASON: &str = "InvalidWorkloadConfig";

/// The invalid values already said, by node.
#[derive(Debug, Default)]
pub struct WorkloadEvents(Mutex<BTreeMap<String, String>>);

impl WorkloadEvents {
    /// Records `node`'s invalid value (`None`: it has none) and returns whether it is new, so
    /// worth an Event.
    pub fn first_seen(&self, node: &str, invalid: Option<&str>) -> bool {
        let mut said = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(value) = invalid else {
            said.remove(node);
            return false;
        };
        if said.get(node).is_some_and(|v| v == value) {
            return false;
        }
        said.insert(node.to_owned(), value.to_owned());
        true
    }
}

/// The node's workload config label when sandbox workloads are on and it is not a valid value.
pub fn invalid_value<'a>(
    node_labels: &'a BTreeMap<String, String>,
    policy: &ClusterPolicySpec,
) -> Option<&'a str> {
    policy.sandbox_default_workload()?;
    node_labels
        .get(labels::GPU_WORKLOAD_CONFIG)
        .map(String::as_str)
        .filter(|value| WorkloadConfig::from_name(value).is_none())
}

/// The Event's message.
pub fn message(node: &str, value: &str, policy: &ClusterPolicySpec) -> String {
    let default = policy.sandbox_default_workload().unwrap_or_default();
    format!(
        "node {node} is labelled {key}={value:?}, which is none of container, vm-passthrough, \
         vm-vgpu: it runs sandboxWorkloads.defaultWorkload ({default}) instead; set the label to \
         one of those values, or remove it",
        key = labels::GPU_WORKLOAD_CONFIG,
        default = default.as_str(),
    )
}

/// Publishes the Warning about `node`; a refusal is logged, not retried.
pub async fn publish(ctx: &Context, policy: &ClusterPolicySpec, node: &str, value: &str) {
    let said = message(node, value, policy);
    tracing::warn!(node, value, "{said}");
    let event = Event {
        type_: EventType::Warning,
        reason: REASON.to_owned(),
        note: Some(said),
        action: "FallBackToDefaultWorkload".to_owned(),
        secondary: None,
    };
    ctx.one_off_events.publish_on_node(node, &event).await;
}

#[cfg(test)]
mod tests {
    use gpu_operator_api::spec::SandboxWorkloadsSpec;

    use super::*;

    fn sandbox(default: Option<WorkloadConfig>) -> ClusterPolicySpec {
        ClusterPolicySpec {
            sandbox_workloads: Some(SandboxWorkloadsSpec {
                enabled: Some(true),
                default_workload: default,
                ..SandboxWorkloadsSpec::default()
            }),
            ..ClusterPolicySpec::default()
        }
    }

    fn labelled(value: &str) -> BTreeMap<String, String> {
        BTreeMap::from([(labels::GPU_WORKLOAD_CONFIG.to_owned(), value.to_owned())])
    }

    #[test]
    fn only_an_unknown_value_with_sandbox_workloads_on_is_invalid() {
        let on = sandbox(None);
        assert_eq!(invalid_value(&labelled("vm-gpu"), &on), Some("vm-gpu"));
        assert_eq!(invalid_value(&labelled("vm-vgpu"), &on), None);
        assert_eq!(invalid_value(&BTreeMap::new(), &on), None, "no label");
        assert_eq!(
            invalid_value(&labelled("vm-gpu"), &ClusterPolicySpec::default()),
            None,
            "sandbox off: the label is not read"
        );
    }

    #[test]
    fn the_message_names_the_value_the_fallback_and_the_fix() {
        assert_eq!(
            message(
                "n1",
                "vm-gpu",
                &sandbox(Some(WorkloadConfig::VmPassthrough))
            ),
            "node n1 is labelled nvidia.com/gpu.workload.config=\"vm-gpu\", which is none of \
             container, vm-passthrough, vm-vgpu: it runs sandboxWorkloads.defaultWorkload \
             (vm-passthrough) instead; set the label to one of those values, or remove it"
        );
    }

    #[test]
    fn a_value_is_said_once_per_node_until_it_changes() {
        let events = WorkloadEvents::default();
        assert!(events.first_seen("a", Some("x")));
        assert!(!events.first_seen("a", Some("x")));
        assert!(events.first_seen("b", Some("x")), "per node");
        assert!(events.first_seen("a", Some("y")), "another value");
        assert!(!events.first_seen("a", None));
        assert!(
            events.first_seen("a", Some("y")),
            "fixed, then broken again"
        );
    }
}
