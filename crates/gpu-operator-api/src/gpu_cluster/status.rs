//! `GPUCluster.status`: NVIDIA's `state`, `namespace` and `conditions`, and the generation they
//! were computed from.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What the operator observed while deploying the GPUCluster.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::schema::tidy)]
pub struct GpuClusterStatus {
    /// Overall state: `ready` (every component is ready on every node it serves), `notReady`
    /// (rolling out, failing, or a prerequisite is unmet; see `conditions`) or `disabled`.
    pub state: GpuClusterState,
    /// Namespace the operator and the DRA stack run in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Conditions, one per `type`: NVIDIA's `Ready` and `Error`, and one per component
    /// (`DRADriverReady`, …) with a reason and a message naming the nodes and the fix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::gpu_cluster_conditions")]
    pub conditions: Option<Vec<Condition>>,
    /// Ours, not in NVIDIA's API: the `metadata.generation` this status was computed from.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub observed_generation: Option<i64>,
}

/// Overall state of the GPUCluster (NVIDIA's enum).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum GpuClusterState {
    /// Every component is ready.
    #[serde(rename = "ready")]
    Ready,
    /// Some component is not ready yet, failed, or a prerequisite is unmet.
    #[default]
    #[serde(rename = "notReady")]
    NotReady,
    /// Not acted on.
    #[serde(rename = "disabled")]
    Disabled,
}

impl GpuClusterState {
    /// The value as written in `status.state`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ready => "ready",
            Self::NotReady => "notReady",
            Self::Disabled => "disabled",
        }
    }
}
