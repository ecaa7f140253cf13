//! A `podDeletion.podSelector` that matches no pod in the cluster is said once per selector
//! text — a Warning Event on the ClusterPolicy and a log line — since a typo would otherwise
//! leave the GPU users it was meant to find on their nodes without a word. One list of at most
//! one pod's metadata per new selector.

use std::sync::Mutex;

use gpu_operator_api::ClusterPolicy;
use gpu_operator_core::Context;
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, Resource as _,
    api::ListParams,
    runtime::events::{Event, EventType},
};

/// The selector text checked last.
#[derive(Default)]
pub struct SelectorCheck(Mutex<Option<String>>);

impl SelectorCheck {
    /// Checks `text` (the policy's `podDeletion.podSelector`) unless it was checked already.
    pub async fn check(&self, ctx: &Context, policy: &ClusterPolicy, text: Option<&str>) {
        let Some(text) = text.map(str::trim).filter(|t| !t.is_empty()) else {
            return;
        };
        {
            let Ok(mut last) = self.0.lock() else {
                return;
            };
            if last.as_deref() == Some(text) {
                return;
            }
            *last = Some(text.to_owned());
        }
        let pods: Api<Pod> = Api::all(ctx.client.clone());
        match pods
            .list_metadata(&ListParams::default().labels(text).limit(1))
            .await
        {
            Ok(list) if list.items.is_empty() => {
                let note = format!(
                    "driver.upgradePolicy.podDeletion.podSelector {text:?} matches no pod in the cluster: driver upgrades find no GPU users by it; check the labels of the pods it is meant for (kubectl get pods -A -l '{text}')"
                );
                tracing::warn!(selector = text, "{note}");
                let event = Event {
                    type_: EventType::Warning,
                    reason: "GPUUserSelectorMatchesNothing".to_owned(),
                    note: Some(note),
                    action: "DriverUpgrade".to_owned(),
                    secondary: None,
                };
                if let Err(error) = ctx
                    .one_off_events
                    .publish(&event, &policy.object_ref(&()))
                    .await
                {
                    tracing::warn!(%error, "could not publish an Event");
                }
            }
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(%error, selector = text, "could not check podDeletion.podSelector");
                if let Ok(mut last) = self.0.lock() {
                    *last = None;
                }
            }
        }
    }
}
