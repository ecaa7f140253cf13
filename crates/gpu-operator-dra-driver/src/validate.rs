//! Checks a GPUCluster for the DRA driver and resolves what rendering needs: the driver image
//! (`draDriver`, else `DRA_DRIVER_IMAGE`), the validator image of the driver-validation init
//! container (the active ClusterPolicy's `validator` section, else `VALIDATOR_IMAGE`, as NVIDIA
//! reads it), the feature gates (checked as the driver checks them), the two kubelet plugin
//! containers and the ComputeDomain controller, the host paths, and the API server's and nodes'
//! prerequisites ([`crate::prerequisites`]). Pure.

use std::collections::BTreeMap;

use gpu_operator_api::{
    GpuCluster,
    gpu_cluster::DraKubeletPluginSpec,
    spec::{ContainerSpec, EnvVar, ImageSpec, ResourceRequirements as SpecResources},
};
use gpu_operator_core::{
    Error,
    build::{component::Component, shared::Shared},
    contract::Cluster,
};
use k8s_openapi::api::core::v1::ResourceRequirements;

use crate::{feature_gates, prerequisites};

/// The operator's fallback variable of the DRA driver image.
pub const IMAGE_ENV: &str = "DRA_DRIVER_IMAGE";
/// The health service port of the `gpus` container unless `healthcheck.port` says otherwise.
pub const GPUS_HEALTH_PORT: i32 = 51516;
/// The health service port of the `compute-domains` container unless `healthcheck.port` says
/// otherwise.
pub const COMPUTE_DOMAINS_HEALTH_PORT: i32 = 51515;

/// What rendering the DRA driver needs.
#[derive(Clone, Debug)]
pub struct Input {
    /// The DRA driver image.
    pub image: String,
    /// The validator image of the driver-validation init container.
    pub validator_image: String,
    /// The operator namespace.
    pub namespace: String,
    /// `draDriver`'s pull policy and secrets (no args, env or resources: those are per
    /// container).
    pub component: Component,
    /// `draDriver.featureGates`, by name.
    pub feature_gates: BTreeMap<String, bool>,
    /// The `gpus` container.
    pub gpus: Plugin,
    /// The `compute-domains` container and the controller, when `computeDomains` is enabled.
    pub compute_domains: Option<ComputeDomains>,
    /// The kubelet's root directory (`hostPaths.kubeletRootDir`).
    pub kubelet_root_dir: String,
    /// The driver's host directory (`hostPaths.driverInstallDir`).
    pub driver_install_dir: String,
    /// The GPUCluster's `daemonsets` settings.
    pub shared: Shared,
    /// Feature gates no driver release we know has (warned about).
    pub unknown_gates: Vec<String>,
    /// The GPU nodes the driver cannot serve, in a sentence.
    pub unserved: Option<String>,
    /// The warning that the DRA objects go through a beta version of `resource.k8s.io`.
    pub beta_api: Option<gpu_operator_core::contract::Warning>,
}

/// One kubelet plugin container's settings.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plugin {
    /// User variables, over the operator's.
    pub env: Vec<EnvVar>,
    /// Its resources; none by default, as NVIDIA's.
    pub resources: Option<ResourceRequirements>,
    /// The health service port; `None` without health check (no probes, no port).
    pub health_port: Option<i32>,
}

/// The `computeDomains` capability.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ComputeDomains {
    /// The `compute-domains` kubelet plugin container.
    pub plugin: Plugin,
    /// The controller's user variables.
    pub controller_env: Vec<EnvVar>,
    /// The controller's resources.
    pub controller_resources: Option<ResourceRequirements>,
}

impl Input {
    /// Whether feature gate `gate` is set to true.
    pub fn gate(&self, gate: &str) -> bool {
        self.feature_gates.get(gate).copied().unwrap_or(false)
    }
}

/// The DRA driver's input: the GPUCluster always deploys it (the `gpus` capability has no
/// switch). Unmet server prerequisites, gates the driver refuses and unresolvable images are
/// errors naming the field and the fix.
pub fn validate(cluster_cr: &GpuCluster, cluster: &Cluster<'_>) -> Result<Option<Input>, Error> {
    prerequisites::server(cluster.server)?;
    let spec = &cluster_cr.spec;
    let section = &spec.dra_driver;
    let gates = section.feature_gates();
    let findings = feature_gates::check(&gates);
    if !findings.refused.is_empty() {
        return Err(Error::InvalidSpec(format!(
            "spec.draDriver.featureGates: {}",
            findings.refused.join("; ")
        )));
    }
    let image = cluster.image("draDriver", &section.image, IMAGE_ENV)?;
    let validator_image = validator_image(cluster)?;
    let compute_domains = section.compute_domains_enabled().then(|| ComputeDomains {
        plugin: plugin(
            &section.compute_domains.kubelet_plugin,
            COMPUTE_DOMAINS_HEALTH_PORT,
        ),
        controller_env: section
            .compute_domains
            .controller
            .env
            .clone()
            .unwrap_or_default(),
        controller_resources: resources(section.compute_domains.controller.resources.as_ref()),
    });
    Ok(Some(Input {
        image,
        validator_image,
        namespace: cluster.namespace.to_owned(),
        component: Component::of(&section.image, &ContainerSpec::default(), None),
        feature_gates: gates,
        gpus: plugin(&section.gpus.kubelet_plugin, GPUS_HEALTH_PORT),
        compute_domains,
        kubelet_root_dir: spec.host_paths.kubelet_root_dir().to_owned(),
        driver_install_dir: spec.host_paths.driver_install_dir().to_owned(),
        shared: shared(&spec.daemonsets),
        unknown_gates: findings.unknown,
        unserved: prerequisites::unserved_nodes(cluster.facts),
        beta_api: prerequisites::beta_api(cluster.server),
    }))
}

/// The validator image: the active ClusterPolicy's `validator` section when there is one, else
/// the operator's `VALIDATOR_IMAGE` (a GPUCluster has no `validator` section).
pub fn validator_image(cluster: &Cluster<'_>) -> Result<String, Error> {
    match cluster.policy {
        Some(policy) => cluster.validator_image(policy),
        None => cluster.image("validator", &ImageSpec::default(), "VALIDATOR_IMAGE"),
    }
}

/// The GPUCluster's `daemonsets` settings as core shares them (no ClusterPolicy `hostPaths` or
/// `validator`: a GPUCluster's own host paths are resolved above).
pub fn shared(daemonsets: &gpu_operator_api::spec::DaemonsetsSpec) -> Shared {
    Shared {
        daemonsets: daemonsets.clone(),
        host_paths: None,
        validator: None,
    }
}

fn plugin(section: &DraKubeletPluginSpec, default_port: i32) -> Plugin {
    Plugin {
        env: section.env.clone().unwrap_or_default(),
        resources: resources(section.resources.as_ref()),
        health_port: section.healthcheck_port(default_port),
    }
}

fn resources(spec: Option<&SpecResources>) -> Option<ResourceRequirements> {
    spec.map(|r| ResourceRequirements {
        limits: r.limits.clone(),
        requests: r.requests.clone(),
        ..ResourceRequirements::default()
    })
}

#[cfg(test)]
mod tests;
