//! ClusterPolicy as an [`Owner`]: one per cluster (the oldest; the others are `ignored`), its
//! overall `Ready` and `Error`, and the deprecated fields every operand reports of its section.

use std::sync::Arc;

use gpu_operator_api::{ClusterPolicy, ClusterPolicySpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::runtime::reflector::Store;
use tokio::sync::Notify;

use crate::{
    cache::{
        change_stream::Changes,
        stores::{Stores, Subscriptions},
    },
    contract::{Owner, Warning},
    report::deprecated,
};

impl Owner for ClusterPolicy {
    type Spec = ClusterPolicySpec;
    const SINGLETON: bool = true;
    const STATUS_FIELDS: &'static [&'static str] = &["state", "namespace"];

    fn spec(&self) -> &ClusterPolicySpec {
        &self.spec
    }

    fn conditions(&self) -> Option<&[Condition]> {
        self.status
            .as_ref()
            .map(|status| status.conditions.as_deref().unwrap_or_default())
    }

    fn state(&self) -> Option<&str> {
        self.status.as_ref().map(|status| status.state.as_str())
    }

    fn section_warnings(&self, section: &str) -> Vec<Warning> {
        deprecated::warnings(section, &self.spec)
    }

    fn cache(stores: &Stores) -> &Store<Self> {
        &stores.policies
    }

    fn events(stores: &Stores) -> &Arc<Notify> {
        &stores.policy_events
    }

    fn changes(subscriptions: &Subscriptions) -> Changes<Self> {
        subscriptions.policies.clone()
    }
}
