//! The agent's Events: one per fault condition that appears (Warning, the fault's reason) or
//! clears (Normal, `GPUFaultCleared`), about its Node, in the operator namespace
//! (`kubectl describe node` shows them). A refused Event is logged and never retried: the
//! condition already says it.

use gpu_operator_health::condition::Transition;
use k8s_openapi::{
    api::{core::v1::ObjectReference, events::v1::Event},
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta},
    jiff::Timestamp,
};
use kube::{Api, Client, api::PostParams};
use tracing::warn;

/// The reporting controller of the agent's Events.
pub const REPORTER: &str = "gpu-operator/gpu-health";

/// The Event for `transition` on node `node` (uid `uid`) in `namespace`.
pub fn event(
    transition: &Transition,
    node: &str,
    uid: Option<&str>,
    namespace: &str,
    now: Timestamp,
) -> Event {
    Event {
        action: Some("ReportGPUHealth".to_owned()),
        reason: Some(transition.reason.clone()),
        note: Some(transition.note.chars().take(1024).collect()),
        event_time: Some(MicroTime(now)),
        regarding: Some(ObjectReference {
            api_version: Some("v1".to_owned()),
            kind: Some("Node".to_owned()),
            name: Some(node.to_owned()),
            uid: uid.map(str::to_owned),
            ..ObjectReference::default()
        }),
        metadata: ObjectMeta {
            namespace: Some(namespace.to_owned()),
            name: Some(format!("{node}.{:x}", now.as_nanosecond())),
            ..ObjectMeta::default()
        },
        reporting_controller: Some(REPORTER.to_owned()),
        reporting_instance: Some(format!("{REPORTER}-{node}")),
        type_: Some(
            if transition.warning {
                "Warning"
            } else {
                "Normal"
            }
            .to_owned(),
        ),
        ..Event::default()
    }
}

/// Records `transitions` about `node`.
pub async fn record(
    client: &Client,
    namespace: &str,
    node: &str,
    uid: Option<&str>,
    transitions: &[Transition],
) {
    let events = Api::<Event>::namespaced(client.clone(), namespace);
    for t in transitions {
        let e = event(t, node, uid, namespace, Timestamp::now());
        if let Err(err) = events.create(&PostParams::default(), &e).await {
            warn!(node, reason = %t.reason, "recording the Event failed: {err}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warning_about_the_node_in_the_operator_namespace() {
        let t = Transition {
            warning: true,
            reason: "DoubleBitECC".into(),
            note: "GPUMemoryError: GPU 1 …".into(),
        };
        let e = event(
            &t,
            "gpu-1",
            Some("u-1"),
            "gpu-operator",
            Timestamp::UNIX_EPOCH,
        );
        assert_eq!(e.type_.as_deref(), Some("Warning"));
        assert_eq!(e.reason.as_deref(), Some("DoubleBitECC"));
        assert_eq!(e.metadata.namespace.as_deref(), Some("gpu-operator"));
        let regarding = e.regarding.unwrap();
        assert_eq!(
            (regarding.kind.as_deref(), regarding.name.as_deref()),
            (Some("Node"), Some("gpu-1"))
        );
        assert_eq!(regarding.uid.as_deref(), Some("u-1"));
    }
}
