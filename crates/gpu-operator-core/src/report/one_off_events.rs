//! Events about things that each happen once, such as a node's driver upgrade starting, failing
//! or finishing: created directly, without kube's `Recorder`. The recorder keeps every Event it
//! published for six minutes to fold a repeat into a series, and these never repeat: in a
//! 1,000-node driver upgrade its cache held 1,715 Events (2.8 MiB at the heap's peak), growing
//! with the fleet. The Events are the recorder's (`events.k8s.io/v1`, same reporter and names).

use k8s_openapi::{
    api::{core::v1::ObjectReference, events::v1::Event as K8sEvent},
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta},
    jiff::Timestamp,
};
use kube::{
    Api,
    api::PostParams,
    runtime::events::{Event, EventType, Reporter},
};

/// Creates one Event per call, remembering none.
#[derive(Clone)]
pub struct OneOffEvents {
    client: kube::Client,
    reporter: Reporter,
}

impl OneOffEvents {
    /// Events from `reporter`, written with `client`.
    pub fn new(client: kube::Client, reporter: Reporter) -> Self {
        Self { client, reporter }
    }

    /// Creates `event` about `regarding` (in its namespace; `default` for cluster-scoped objects).
    ///
    /// # Errors
    /// The API server's refusal.
    pub async fn publish(
        &self,
        event: &Event,
        regarding: &ObjectReference,
    ) -> Result<(), kube::Error> {
        let namespace = regarding.namespace.as_deref().unwrap_or("default");
        Api::<K8sEvent>::namespaced(self.client.clone(), namespace)
            .create(
                &PostParams::default(),
                &object(&self.reporter, event, regarding, Timestamp::now()),
            )
            .await
            .map(drop)
    }

    /// Creates `event` about Node `node`; a refusal is logged, as an Event is only said once.
    pub async fn publish_on_node(&self, node: &str, event: &Event) {
        let reference = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(node.to_owned()),
            ..ObjectReference::default()
        };
        if let Err(error) = self.publish(event, &reference).await {
            tracing::warn!(%error, node, reason = %event.reason, "could not publish an Event");
        }
    }
}

/// The Event object for `event` about `regarding` at `now`.
fn object(
    reporter: &Reporter,
    event: &Event,
    regarding: &ObjectReference,
    now: Timestamp,
) -> K8sEvent {
    let subject = regarding.name.as_deref().unwrap_or(&reporter.controller);
    K8sEvent {
        action: Some(event.action.clone()),
        reason: Some(event.reason.clone()),
        note: event.note.clone(),
        event_time: Some(MicroTime(now)),
        regarding: Some(regarding.clone()),
        related: event.secondary.clone(),
        metadata: ObjectMeta {
            namespace: regarding.namespace.clone(),
            name: Some(format!("{subject}.{:x}", now.as_nanosecond())),
            ..ObjectMeta::default()
        },
        reporting_controller: Some(reporter.controller.clone()),
        reporting_instance: Some(
            reporter
                .instance
                .clone()
                .unwrap_or_else(|| reporter.controller.clone()),
        ),
        type_: Some(
            match event.type_ {
                EventType::Normal => "Normal",
                EventType::Warning => "Warning",
            }
            .to_owned(),
        ),
        ..K8sEvent::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_about_a_node_names_it_and_its_reporter_and_starts_no_series() {
        let reporter = Reporter {
            controller: "gpu-operator".to_owned(),
            instance: Some("gpu-operator-7d9f".to_owned()),
        };
        let event = Event {
            type_: EventType::Warning,
            reason: "DriverUpgradeFailed".to_owned(),
            note: Some("drain timed out".to_owned()),
            action: "DriverUpgrade".to_owned(),
            secondary: None,
        };
        let node = ObjectReference {
            api_version: Some("v1".to_owned()),
            kind: Some("Node".to_owned()),
            name: Some("gpu-1".to_owned()),
            ..ObjectReference::default()
        };
        let now = Timestamp::from_second(1_700_000_000).unwrap();
        let object = object(&reporter, &event, &node, now);
        assert_eq!(
            object.metadata.name.as_deref(),
            Some(format!("gpu-1.{:x}", now.as_nanosecond()).as_str())
        );
        assert_eq!(object.metadata.namespace, None);
        assert_eq!(object.type_.as_deref(), Some("Warning"));
        assert_eq!(object.reason.as_deref(), Some("DriverUpgradeFailed"));
        assert_eq!(object.note.as_deref(), Some("drain timed out"));
        assert_eq!(object.regarding.as_ref(), Some(&node));
        assert_eq!(object.reporting_controller.as_deref(), Some("gpu-operator"));
        assert_eq!(
            object.reporting_instance.as_deref(),
            Some("gpu-operator-7d9f")
        );
        assert!(object.series.is_none() && object.deprecated_count.is_none());
    }
}
