//! The reads and the Events of a node's pending resource API switch ([`crate::api_switch`]):
//! only for a node whose switch is pending, nothing is cached for the others.
//!
//! - `device-plugin` → `dra`: the pods on the node (`spec.nodeName`, every namespace).
//! - `dra` → `device-plugin`: the ResourceClaims of every namespace, as the GPUCluster's
//!   teardown reads them (at the served `resource.k8s.io` version). A pool relabelled at once has many nodes asking within one poll, so
//!   one list serves them all for [`CLAIMS_FRESH`] while they wait (a node is freed only by a
//!   list read for it, which may not predate its last claim); it keeps only the claims allocated
//!   devices of our drivers, and is dropped once stale ([`SwitchReads::drop_stale`], called by every
//!   node reconcile without a pending switch), so it costs nothing once nothing switches.
//!
//! [`SwitchWaits`] remembers, per waiting node only, the holders already said, so the Warning is
//! said once per distinct set of holders, and the Normal Event only after a switch that waited.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use gpu_operator_api::gpu_cluster::claims::holds_our_devices;
use gpu_operator_core::{Context, Error, dra_api};
use k8s_openapi::api::{
    core::v1::Pod,
    resource::v1::{ResourceClaim, ResourceClaimSpec},
};
use kube::{
    Api,
    api::ListParams,
    runtime::events::{Event, EventType},
};

use crate::{
    api_switch::{self, SWITCHED_REASON, Step, Switch, WAITING_REASON},
    resource_api::ResourceApi,
};

/// How long one list of the ResourceClaims serves the nodes that switch away from DRA.
pub const CLAIMS_FRESH: Duration = Duration::from_secs(5);

/// The last list of the claims allocated devices of our drivers, and when it was read.
type ClaimsRead = (Instant, Arc<Vec<ResourceClaim>>);

/// The claims list shared by the nodes that switch within [`CLAIMS_FRESH`].
#[derive(Debug, Default)]
pub struct SwitchReads(Mutex<Option<ClaimsRead>>);

impl SwitchReads {
    /// The [`Step`] of `node`'s `switch` now, from one read.
    pub async fn step(&self, ctx: &Context, node: &str, switch: Switch) -> Result<Step, Error> {
        match switch.from {
            ResourceApi::DevicePlugin => {
                let on_node = ListParams::default().fields(&format!("spec.nodeName={node}"));
                let pods = Api::<Pod>::all(ctx.client.clone())
                    .list(&on_node)
                    .await
                    .map_err(Error::kube(format!("listing the pods on node {node}")))?;
                Ok(api_switch::step_to_dra(&pods.items))
            }
            ResourceApi::Dra => {
                let (claims, fresh) = self.claims(ctx, true).await?;
                let step = api_switch::step_from_dra(&claims, &ctx.namespace, node);
                if fresh || matches!(step, Step::Wait(_)) {
                    return Ok(step);
                }
                // A shared list may predate a claim allocated since: only a fresh one frees
                // the node.
                let (claims, _) = self.claims(ctx, false).await?;
                Ok(api_switch::step_from_dra(&claims, &ctx.namespace, node))
            }
        }
    }

    /// Forgets the last claims list once it is stale.
    pub fn drop_stale(&self, now: Instant) {
        let mut memo = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if memo
            .as_ref()
            .is_some_and(|(at, _)| now.duration_since(*at) >= CLAIMS_FRESH)
        {
            *memo = None;
        }
    }

    /// The claims allocated devices of our drivers, and whether they were just read: the shared
    /// list when `shared` and it is fresh, else a new list (shared from then on).
    async fn claims(
        &self,
        ctx: &Context,
        shared: bool,
    ) -> Result<(Arc<Vec<ResourceClaim>>, bool), Error> {
        let now = Instant::now();
        self.drop_stale(now);
        if shared
            && let Some((_, claims)) = self
                .0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .as_ref()
        {
            return Ok((claims.clone(), false));
        }
        let listed: Vec<ResourceClaim> = dra_api::list_all(
            &ctx.client,
            ctx.server.dra_api_in_use(),
            &ListParams::default(),
        )
        .await?;
        let ours: Vec<_> = listed
            .into_iter()
            .filter(|claim| holds_our_devices(claim, None))
            .map(slim)
            .collect();
        let claims = Arc::new(ours);
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some((now, claims.clone()));
        Ok((claims, true))
    }
}

/// `claim` without what the switch never reads (managed fields, annotations, labels, spec).
fn slim(mut claim: ResourceClaim) -> ResourceClaim {
    claim.metadata.managed_fields = None;
    claim.metadata.annotations = None;
    claim.metadata.labels = None;
    claim.spec = ResourceClaimSpec::default();
    claim
}

/// The holders already said, by waiting node.
#[derive(Debug, Default)]
pub struct SwitchWaits(Mutex<BTreeMap<String, Vec<String>>>);

impl SwitchWaits {
    /// Records that `node` waits for `holders`; whether they are new, so worth an Event.
    pub fn said(&self, node: &str, holders: &[String]) -> bool {
        let mut said = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if said.get(node).is_some_and(|h| h == holders) {
            return false;
        }
        said.insert(node.to_owned(), holders.to_vec());
        true
    }

    /// Forgets `node`; whether it was waiting.
    pub fn forget(&self, node: &str) -> bool {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(node)
            .is_some()
    }
}

/// Publishes the Warning that `node`'s `switch` waits for `holders`.
pub async fn publish_waiting(ctx: &Context, node: &str, switch: Switch, holders: &[String]) {
    let said = api_switch::waiting_message(node, switch, holders);
    tracing::warn!(node, "{said}");
    let event = Event {
        type_: EventType::Warning,
        reason: WAITING_REASON.to_owned(),
        note: Some(said),
        action: "WaitForGPUWorkloads".to_owned(),
        secondary: None,
    };
    ctx.one_off_events.publish_on_node(node, &event).await;
}

/// Publishes the Normal Event that `node`'s `switch`, which waited, is made.
pub async fn publish_switched(ctx: &Context, node: &str, switch: Switch) {
    let said = api_switch::switched_message(node, switch);
    tracing::info!(node, "{said}");
    let event = Event {
        type_: EventType::Normal,
        reason: SWITCHED_REASON.to_owned(),
        note: Some(said),
        action: "SwitchResourceAPI".to_owned(),
        secondary: None,
    };
    ctx.one_off_events.publish_on_node(node, &event).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holders_are_said_once_per_distinct_set_and_forgotten_with_the_wait() {
        let waits = SwitchWaits::default();
        let a = vec!["ml/a".to_owned()];
        let ab = vec!["ml/a".to_owned(), "ml/b".to_owned()];
        assert!(waits.said("n1", &a));
        assert!(!waits.said("n1", &a));
        assert!(waits.said("n2", &a), "per node");
        assert!(waits.said("n1", &ab), "another set");
        assert!(waits.forget("n1"));
        assert!(!waits.forget("n1"), "forgotten: no second Switched");
        assert!(waits.said("n1", &ab), "a new wait is said again");
    }

    #[test]
    fn a_stale_claims_list_is_dropped() {
        let reads = SwitchReads::default();
        let at = Instant::now();
        *reads.0.lock().unwrap() = Some((at, Arc::new(Vec::new())));
        reads.drop_stale(at + CLAIMS_FRESH / 2);
        assert!(reads.0.lock().unwrap().is_some(), "fresh: kept");
        reads.drop_stale(at + CLAIMS_FRESH);
        assert!(reads.0.lock().unwrap().is_none(), "stale: dropped");
    }
}
