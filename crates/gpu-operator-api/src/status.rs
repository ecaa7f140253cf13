//! `ClusterPolicy.status`: NVIDIA's `state`, `namespace` and `conditions`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What the operator observed while reconciling the ClusterPolicy.
///
/// New summary fields (per-operand counts, problem nodes) are added here as optional fields, so
/// older objects keep deserializing.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::schema::tidy)]
pub struct ClusterPolicyStatus {
    /// Overall state: `ready` (every enabled component is running), `notReady` (some are still
    /// rolling out or failing; see `conditions`) or `ignored` (another, older ClusterPolicy is
    /// the active one).
    pub state: State,
    /// Namespace the operator and its operands run in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Conditions, one per `type`: `Ready` and `Error` (NVIDIA's pair, always opposite), plus
    /// one per component such as `DriverReady`, each with a reason and message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
}

/// Overall state of a ClusterPolicy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum State {
    /// This ClusterPolicy is not the active one; the oldest ClusterPolicy is.
    #[serde(rename = "ignored")]
    Ignored,
    /// Every enabled component is deployed and ready.
    #[serde(rename = "ready")]
    Ready,
    /// Some enabled component is not ready yet, or reconciling failed.
    #[default]
    #[serde(rename = "notReady")]
    NotReady,
}

impl State {
    /// The value as written in `status.state`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ignored => "ignored",
            Self::Ready => "ready",
            Self::NotReady => "notReady",
        }
    }
}
