//! `NVIDIADriver.status`: NVIDIA's `state`, `namespace` and `conditions`, and the generation they
//! were computed from.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What the operator observed while deploying an NVIDIADriver.
///
/// The per-pool summary (ready and desired nodes, the first problem nodes) is added in the
/// conditions and as further optional fields, so older objects keep deserializing.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::schema::tidy)]
pub struct NvidiaDriverStatus {
    /// Overall state: `ready` (the driver runs on every node this NVIDIADriver serves),
    /// `notReady` (still rolling out, failing, or in conflict with another NVIDIADriver; see
    /// `conditions`), `disabled` (the ClusterPolicy does not manage drivers through NVIDIADriver)
    /// or `ignored`.
    pub state: NvidiaDriverState,
    /// Namespace the operator and the driver pods run in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Conditions, one per `type`: `Ready` and `Error` (NVIDIA's pair, always opposite), each
    /// with a reason and a message naming the nodes and the fix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::nvidia_driver_conditions")]
    pub conditions: Option<Vec<Condition>>,
    /// Ours, not in NVIDIA's API: the `metadata.generation` this status was computed from.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub observed_generation: Option<i64>,
}

/// Overall state of an NVIDIADriver.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum NvidiaDriverState {
    /// Not acted on.
    #[serde(rename = "ignored")]
    Ignored,
    /// The driver is deployed and ready on every node this NVIDIADriver serves.
    #[serde(rename = "ready")]
    Ready,
    /// The driver is not ready on some node yet, or deploying it failed.
    #[default]
    #[serde(rename = "notReady")]
    NotReady,
    /// Drivers are not managed through NVIDIADriver (the ClusterPolicy's
    /// `driver.useNvidiaDriverCRD` is not true, or its driver is disabled).
    #[serde(rename = "disabled")]
    Disabled,
}

impl NvidiaDriverState {
    /// The value as written in `status.state`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ignored => "ignored",
            Self::Ready => "ready",
            Self::NotReady => "notReady",
            Self::Disabled => "disabled",
        }
    }
}
