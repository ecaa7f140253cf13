//! `GPUCluster.spec.draDriver`: the NVIDIA DRA driver for GPUs — its image, feature gates, the
//! `gpus` capability (always deployed) and the `computeDomains` capability (Multi-Node NVLink,
//! on by default), as NVIDIA's v26.7 API has them.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::spec::{EnvVar, ImageSpec, ResourceRequirements};

/// The NVIDIA DRA driver for GPUs. There is no top-level switch: the `gpus` capability is always
/// deployed, `computeDomains` has its own.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DraDriverSpec {
    /// Image of the DRA driver: `repository`, `image` and `version` (the chart's default is
    /// `nvcr.io/nvidia/dra-driver-nvidia-gpu:v0.5.0`), or `image` alone as a full reference;
    /// with none, the operator's `DRA_DRIVER_IMAGE`.
    #[serde(flatten)]
    pub image: ImageSpec,
    /// Feature gates of the DRA driver by name, such as `MPSSupport: true`, passed to every
    /// container of the driver as `FEATURE_GATES`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub feature_gates: Option<BTreeMap<String, bool>>,
    /// The `gpus` capability: the `gpus` container of the kubelet plugin, which publishes the
    /// node's GPUs, MIG devices and (with passthrough support) VFIO GPUs as ResourceSlices.
    #[serde(default, skip_serializing_if = "is_default")]
    pub gpus: DraGpusSpec,
    /// The `computeDomains` capability: Multi-Node NVLink (IMEX) domains, with a controller
    /// Deployment and the `compute-domains` container of the kubelet plugin.
    #[serde(default, skip_serializing_if = "is_default")]
    pub compute_domains: DraComputeDomainsSpec,
}

fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

impl DraDriverSpec {
    /// Whether the `computeDomains` capability is deployed: unless `computeDomains.enabled` is
    /// false (the API server's default is true).
    #[must_use]
    pub fn compute_domains_enabled(&self) -> bool {
        self.compute_domains.enabled != Some(false)
    }

    /// The feature gates, none when unset.
    #[must_use]
    pub fn feature_gates(&self) -> BTreeMap<String, bool> {
        self.feature_gates.clone().unwrap_or_default()
    }
}

/// The `gpus` capability of the DRA driver.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DraGpusSpec {
    /// The `gpus` container of the kubelet plugin DaemonSet.
    #[serde(default, skip_serializing_if = "is_default")]
    pub kubelet_plugin: DraKubeletPluginSpec,
}

/// The `computeDomains` capability of the DRA driver.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DraComputeDomainsSpec {
    /// Deploy the ComputeDomain controller and the `compute-domains` kubelet plugin container.
    /// Defaults to true.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = true))]
    pub enabled: Option<bool>,
    /// The ComputeDomain controller Deployment.
    #[serde(default, skip_serializing_if = "is_default")]
    pub controller: DraControllerSpec,
    /// The `compute-domains` container of the kubelet plugin DaemonSet.
    #[serde(default, skip_serializing_if = "is_default")]
    pub kubelet_plugin: DraKubeletPluginSpec,
}

/// One container of the kubelet plugin DaemonSet. Where its pods run is decided by the operator
/// (the GPU nodes of the DRA pools), not here.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DraKubeletPluginSpec {
    /// Environment variables added to the container (a name the operator sets is overridden).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<EnvVar>>,
    /// Resource requests and limits of the container.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// The container's gRPC health service, which its startup and liveness probes call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub healthcheck: Option<DraHealthcheckSpec>,
}

impl DraKubeletPluginSpec {
    /// The health service's port, `None` when the health check is disabled; `default_port` when
    /// unset (NVIDIA's 51516 for `gpus`, 51515 for `compute-domains`).
    #[must_use]
    pub fn healthcheck_port(&self, default_port: i32) -> Option<i32> {
        match &self.healthcheck {
            Some(DraHealthcheckSpec {
                enabled: Some(false),
                ..
            }) => None,
            Some(DraHealthcheckSpec {
                port: Some(port), ..
            }) => Some(*port),
            _ => Some(default_port),
        }
    }
}

/// The gRPC health service of a kubelet plugin container.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DraHealthcheckSpec {
    /// Serve the health service and probe it. Defaults to true.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = true))]
    pub enabled: Option<bool>,
    /// Its port. Defaults to 51516 for `gpus` and 51515 for `compute-domains`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<i32>,
}

/// The ComputeDomain controller Deployment. Where it runs is decided by the operator (control
/// plane nodes preferred).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DraControllerSpec {
    /// Environment variables added to the controller container.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<EnvVar>>,
    /// Resource requests and limits of the controller container.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_ports_follow_nvidias_defaults_and_switch() {
        let mut plugin = DraKubeletPluginSpec::default();
        assert_eq!(plugin.healthcheck_port(51516), Some(51516));
        plugin.healthcheck = Some(DraHealthcheckSpec {
            enabled: None,
            port: Some(52000),
        });
        assert_eq!(plugin.healthcheck_port(51516), Some(52000));
        plugin.healthcheck = Some(DraHealthcheckSpec {
            enabled: Some(false),
            port: Some(52000),
        });
        assert_eq!(plugin.healthcheck_port(51516), None);
    }

    #[test]
    fn compute_domains_are_on_unless_switched_off() {
        let mut spec = DraDriverSpec::default();
        assert!(spec.compute_domains_enabled());
        spec.compute_domains.enabled = Some(false);
        assert!(!spec.compute_domains_enabled());
    }
}
