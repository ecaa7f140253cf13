//! Test support: GPUClusters from JSON and the cluster views the tests validate them on.

use gpu_operator_api::{ClusterPolicySpec, GpuCluster, GpuClusterSpec};
use gpu_operator_core::{
    Error,
    cache::{facts::ClusterFacts, server_facts::ServerFacts},
    contract::{Cluster, Operand},
    fixtures,
};

use crate::{DraDriver, Input};

/// The GPUCluster of `spec` (JSON of its `spec`).
pub fn gpu_cluster(spec: serde_json::Value) -> GpuCluster {
    let spec: GpuClusterSpec = serde_json::from_value(spec).unwrap();
    GpuCluster::new("gpu-cluster", spec)
}

/// What the tests vary of the cluster view.
#[derive(Default)]
pub struct View {
    pub facts: ClusterFacts,
    pub server: ServerFacts,
    pub policy: Option<ClusterPolicySpec>,
}

/// Runs operand `O`'s validation of `cr` on `view`, with the fixtures' image environment.
pub fn validate_on<O: Operand<Owner = GpuCluster>>(
    cr: &GpuCluster,
    view: &View,
) -> Result<Option<O::Input>, Error> {
    let cluster = Cluster {
        namespace: "gpu-operator",
        facts: &view.facts,
        image_env: &fixtures::image_env,
        config_maps: &fixtures::plugin_configs,
        policy: view.policy.as_ref(),
        server: &view.server,
    };
    O::validate(cr, &cluster)
}

/// The DRA driver's input for `spec` on a cluster that knows nothing.
pub fn input(spec: serde_json::Value) -> Input {
    validate_on::<DraDriver>(&gpu_cluster(spec), &View::default())
        .unwrap()
        .unwrap()
}
