//! `spec.validator` and `spec.nodeStatusExporter`: checking each node's GPU stack and reporting
//! the result.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{ContainerSpec, EnvVar, ImageSpec};

/// The operator validator.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::cel::validator)]
pub struct ValidatorSpec {
    /// Image of the validator.
    #[serde(flatten)]
    pub image: ImageSpec,
    /// Options of the validator container.
    #[serde(flatten)]
    pub container: ContainerSpec,
    /// Run the validator pods in the node's network namespace. Defaults to false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_network: Option<bool>,
    /// Ours, not in NVIDIA's API: remove the startup taint `nvidia.com/gpu.not-ready:NoSchedule`
    /// from a node once its whole GPU stack is validated, so nodes that register with that taint
    /// get GPU workloads only when the stack works (useful with cluster autoscalers). Defaults to
    /// false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lift_startup_taint: Option<bool>,
    /// Ours, not in NVIDIA's API: the GPU health agent, a container of the validator's pods that
    /// reads each GPU's health through NVML and reports it as Node conditions (`GPUHealthy`,
    /// `GPUXidError`, `GPUMemoryError`, `GPULost`, `GPUThrottled`). It runs this operator's own
    /// image whatever `validator.repository` names.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub health: Option<HealthSpec>,
    /// Settings of the device plugin check.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugin: Option<ValidatorComponentSpec>,
    /// Settings of the driver check, for example env `DISABLE_DEV_CHAR_SYMLINK_CREATION`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver: Option<ValidatorComponentSpec>,
    /// Settings of the container toolkit check.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub toolkit: Option<ValidatorComponentSpec>,
    /// Settings of the CUDA workload check.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cuda: Option<ValidatorComponentSpec>,
    /// Settings of the VFIO (GPU passthrough) check.
    #[serde(rename = "vfioPCI", skip_serializing_if = "Option::is_none")]
    pub vfio_pci: Option<ValidatorComponentSpec>,
    /// Settings of the vGPU manager check.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vgpu_manager: Option<ValidatorComponentSpec>,
    /// Settings of the vGPU devices check.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vgpu_devices: Option<ValidatorComponentSpec>,
}

/// The GPU health agent (ours).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HealthSpec {
    /// Run the agent. Defaults to true.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Seconds between two reads of the GPUs (the agent waits for XID events meanwhile).
    /// Defaults to 30.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 3600))]
    pub poll_interval_seconds: Option<u32>,
    /// Taint a node `nvidia.com/gpu.unhealthy:NoSchedule` while `GPUHealthy` is False, and lift
    /// the taint when it is True again. Defaults to false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub taint_unhealthy: Option<bool>,
}

impl HealthSpec {
    /// Whether the agent runs (`enabled` unset or true).
    pub fn is_enabled(spec: Option<&Self>) -> bool {
        spec.and_then(|h| h.enabled) != Some(false)
    }
}

/// Settings of one validator check.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ValidatorComponentSpec {
    /// Environment variables of this check's container, for example `WITH_WORKLOAD=true` to run
    /// a test pod.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<EnvVar>>,
}

/// The node status exporter.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::cel::disabled_by_default)]
pub struct NodeStatusExporterSpec {
    /// Deploy the node status exporter, which publishes each node's validation results as
    /// Prometheus metrics. Defaults to false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Image of the node status exporter (NVIDIA ships it in the validator image).
    #[serde(flatten)]
    pub image: ImageSpec,
    /// Options of the node status exporter container.
    #[serde(flatten)]
    pub container: ContainerSpec,
    /// Run the node status exporter pods in the node's network namespace. Defaults to false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_network: Option<bool>,
}
