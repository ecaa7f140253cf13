//! What validation may know about the cluster besides the owner's spec: the namespace, the node
//! facts, the operator's image fallbacks, the ConfigMaps users name, and the active ClusterPolicy
//! (which an NVIDIADriver's operand takes its shared pod settings and its opt-in from), and the
//! API server's version and DRA API versions.

use std::sync::Arc;

use gpu_operator_api::{ClusterPolicySpec, spec::ImageSpec};
use k8s_openapi::api::core::v1::ConfigMap;

use crate::{
    Error,
    build::image,
    cache::{facts::ClusterFacts, server_facts::ServerFacts},
};

/// What validation may know about the cluster besides the ClusterPolicy.
#[derive(Clone, Copy)]
pub struct Cluster<'a> {
    /// The operator namespace, where namespaced operand objects live.
    pub namespace: &'a str,
    /// Facts about the GPU nodes.
    pub facts: &'a ClusterFacts,
    /// The operator's image environment fallbacks (`DEVICE_PLUGIN_IMAGE`, …) by variable name.
    pub image_env: &'a (dyn Fn(&str) -> Option<String> + Sync),
    /// The ConfigMaps of the operator namespace by name, such as the one `devicePlugin.config`
    /// names.
    pub config_maps: &'a (dyn Fn(&str) -> Option<Arc<ConfigMap>> + Sync),
    /// The spec of the active ClusterPolicy, if any: what operands of other owner kinds take
    /// from it (the `daemonsets`, `hostPaths` and `validator` settings every pod shares, the
    /// `driver.useNvidiaDriverCRD` switch). ClusterPolicy operands read their own spec instead.
    pub policy: Option<&'a ClusterPolicySpec>,
    /// The API server's version and the `resource.k8s.io` versions it serves, discovered at
    /// start-up; [`ServerFacts::unknown`] where nobody asked (then nothing is refused for them).
    pub server: &'a ServerFacts,
}

impl Cluster<'_> {
    /// Resolves the image of ClusterPolicy section `section` by NVIDIA's rules, with the
    /// operator's environment variable `env` as the fallback.
    pub fn image(&self, section: &str, spec: &ImageSpec, env: &str) -> Result<String, Error> {
        Ok(image::resolve(
            section,
            spec,
            env,
            (self.image_env)(env).as_deref(),
        )?)
    }

    /// The validator image (`validator` section, `VALIDATOR_IMAGE` fallback), which the
    /// validation barrier init containers of other operands run.
    pub fn validator_image(&self, spec: &ClusterPolicySpec) -> Result<String, Error> {
        let validator = spec.validator.clone().unwrap_or_default();
        self.image("validator", &validator.image, "VALIDATOR_IMAGE")
    }
}

impl std::fmt::Debug for Cluster<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("namespace", &self.namespace)
            .field("facts", self.facts)
            .field("policy", &self.policy.is_some())
            .field("server", self.server)
            .finish_non_exhaustive()
    }
}
