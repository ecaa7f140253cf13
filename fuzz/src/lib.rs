//! What the fuzz targets share: every operand's `validate` and `render`, and the node labeller's
//! label changes, for one ClusterPolicy spec on every node profile of the fixtures.

use std::collections::BTreeMap;

use gpu_operator_api::ClusterPolicySpec;
use gpu_operator_core::{
    fixtures,
    contract::{Cluster, Operand},
};

/// Runs every operand's validate, render and warnings for `spec` on every node profile, and the
/// labeller's label changes on a GPU node and on a bare one. Must return, never panic.
pub fn every_operand(spec: &ClusterPolicySpec) {
    fn one<O: Operand>(spec: &ClusterPolicySpec, cluster: &Cluster<'_>) {
        if let Ok(Some(input)) = O::validate(spec, cluster) {
            let _ = O::render(&input);
            let _ = O::warnings(&input);
        }
    }
    for profile in fixtures::profiles() {
        let cluster = Cluster {
            namespace: "gpu-operator",
            facts: &profile.facts,
            image_env: &fixtures::image_env,
            config_maps: &fixtures::plugin_configs,
        };
        one::<gpu_operator_driver::Driver>(spec, &cluster);
        one::<gpu_operator_toolkit::Toolkit>(spec, &cluster);
        one::<gpu_operator_device_plugin::DevicePlugin>(spec, &cluster);
        one::<gpu_operator_gfd::GpuFeatureDiscovery>(spec, &cluster);
        one::<gpu_operator_dcgm_hostengine::Dcgm>(spec, &cluster);
        one::<gpu_operator_dcgm_exporter::DcgmExporter>(spec, &cluster);
        one::<gpu_operator_mig_manager::MigManager>(spec, &cluster);
        one::<gpu_operator_validator_operand::Validation>(spec, &cluster);
        one::<gpu_operator_node_status_exporter::NodeStatusExporter>(spec, &cluster);
        one::<gpu_operator_sandbox::Sandbox>(spec, &cluster);
    }
    for labels in [
        BTreeMap::from([("nvidia.com/gpu.present".to_owned(), "true".to_owned())]),
        BTreeMap::new(),
    ] {
        let _ = gpu_operator_node_labels::desired::label_changes(&labels, spec);
    }
}
