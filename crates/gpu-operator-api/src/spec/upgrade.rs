//! `spec.driver.upgradePolicy`: how a new driver rolls through the nodes.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How the operator upgrades the driver node by node: cordon, wait for jobs, evict GPU pods,
/// optionally drain, restart the driver pod, validate, uncordon.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::cel::upgrade_policy)]
pub struct DriverUpgradePolicySpec {
    /// Let the operator drive driver upgrades node by node. Defaults to false (NVIDIA's chart
    /// sets true); when false, driver pods are replaced only when deleted.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = false))]
    pub auto_upgrade: Option<bool>,
    /// How many nodes may upgrade at the same time; 0 means no limit. Defaults to 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 1), range(min = 0))]
    pub max_parallel_upgrades: Option<i64>,
    /// How many GPU nodes may be unavailable during the upgrade: a number or a percentage of the
    /// GPU nodes (rounded up). Defaults to `25%`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "25%"))]
    pub max_unavailable: Option<IntOrString>,
    /// How the GPU pods of a node are deleted before its driver restarts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_deletion: Option<PodDeletionSpec>,
    /// Which running jobs to wait for before a node is upgraded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait_for_completion: Option<WaitForCompletionSpec>,
    /// Whether and how a node is drained before its driver restarts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drain: Option<DrainSpec>,
}

/// Deletion of the GPU pods of a node before its driver restarts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodDeletionSpec {
    /// Also delete GPU pods not managed by a controller (they are not recreated). Defaults to
    /// false.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = false))]
    pub force: Option<bool>,
    /// Seconds to wait for the pods to go; 0 waits forever. Defaults to 300.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 300), range(min = 0))]
    pub timeout_seconds: Option<i64>,
    /// Also delete pods that use emptyDir volumes (their data is lost). Defaults to false.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = false))]
    pub delete_empty_dir: Option<bool>,
    /// Label selector of more pods that hold the GPUs without requesting one, such as
    /// `app=vllm`: they are deleted with the GPU pods (ours; proposed to NVIDIA's upgrade library
    /// as `PodDeletionSpec.PodSelector`). Empty: only the pods found by their requests, runtime
    /// class, DRA claims and `nvidia.com/gpu.deploy.client` node selector.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_selector: Option<String>,
}

/// Jobs to wait for before a node is upgraded.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WaitForCompletionSpec {
    /// Label selector of the pods to wait for, such as `app=training`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_selector: Option<String>,
    /// Seconds to wait for them; 0 waits forever. Defaults to 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 0), range(min = 0))]
    pub timeout_seconds: Option<i64>,
}

/// Draining of a node before its driver restarts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DrainSpec {
    /// Drain the node. Defaults to false.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = false))]
    pub enable: Option<bool>,
    /// Also delete pods not managed by a controller. Defaults to false.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = false))]
    pub force: Option<bool>,
    /// Label selector of the pods to drain; empty means all pods.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_selector: Option<String>,
    /// Seconds to wait for the drain; 0 waits forever. Defaults to 300.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 300), range(min = 0))]
    pub timeout_seconds: Option<i64>,
    /// Also delete pods that use emptyDir volumes (their data is lost). Defaults to false.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = false))]
    pub delete_empty_dir: Option<bool>,
}
