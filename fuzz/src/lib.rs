//! What the fuzz targets share: every operand's `validate` and `render` (the operand registry's
//! list), and the node labeller's label changes, for one ClusterPolicy spec on every node profile
//! of the fixtures.

use std::collections::BTreeMap;

use gpu_operator_api::{ClusterPolicy, ClusterPolicySpec};
use gpu_operator_core::{
    contract::{Cluster, Operand},
    fixtures,
};
use gpu_operator_operands::Visit;

/// Runs every operand's validate, render and warnings for `spec` on every node profile, and the
/// labeller's label changes on a GPU node and on a bare one. Must return, never panic.
pub fn every_operand(spec: &ClusterPolicySpec) {
    /// Each registered operand on one profile.
    struct Every<'a> {
        spec: &'a ClusterPolicySpec,
        cluster: Cluster<'a>,
    }
    impl Visit for Every<'_> {
        fn operand<O: Operand<Owner = ClusterPolicy>>(&mut self) {
            if let Ok(Some(input)) = O::validate(self.spec, &self.cluster) {
                let _ = O::render(&input);
                let _ = O::warnings(&input);
            }
        }
    }
    for profile in fixtures::profiles() {
        gpu_operator_operands::visit_all(&mut Every {
            spec,
            cluster: Cluster {
                namespace: "gpu-operator",
                facts: &profile.facts,
                image_env: &fixtures::image_env,
                config_maps: &fixtures::plugin_configs,
                policy: None,
                server: gpu_operator_core::cache::server_facts::ServerFacts::unknown(),
            },
        });
    }
    for labels in [
        BTreeMap::from([("nvidia.com/gpu.present".to_owned(), "true".to_owned())]),
        BTreeMap::new(),
    ] {
        let _ = gpu_operator_node_labels::desired::label_changes(&labels, spec);
    }
}
