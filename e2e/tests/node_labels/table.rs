//! The labels the operator should write per node profile, written by hand from NVIDIA's
//! behaviour (an oracle outside the code under test), and which labels of a node are ours.

use std::collections::BTreeMap;

use gpu_operator_harness::fleet::Profile;

/// What NVIDIA's operator writes on a node of `profile` under a default ClusterPolicy, written by
/// hand from reference §1.5 (not computed by the code under test): `gpu.present` and the gates of
/// the `container` workload on GPU nodes, plus `mig-manager` and the seeded
/// `mig.config=all-disabled` on MIG-capable ones; nothing on CPU nodes.
pub fn expected_labels(profile: Profile) -> BTreeMap<String, String> {
    let table: &[(&str, &str)] = match profile {
        Profile::H100 | Profile::A100 => &[
            ("nvidia.com/gpu.present", "true"),
            ("nvidia.com/gpu.deploy.driver", "true"),
            ("nvidia.com/gpu.deploy.gpu-feature-discovery", "true"),
            ("nvidia.com/gpu.deploy.container-toolkit", "true"),
            ("nvidia.com/gpu.deploy.device-plugin", "true"),
            ("nvidia.com/gpu.deploy.dcgm", "true"),
            ("nvidia.com/gpu.deploy.dcgm-exporter", "true"),
            ("nvidia.com/gpu.deploy.node-status-exporter", "true"),
            ("nvidia.com/gpu.deploy.operator-validator", "true"),
            ("nvidia.com/gpu.deploy.client", "true"),
            ("nvidia.com/gpu.deploy.mig-manager", "true"),
            ("nvidia.com/mig.config", "all-disabled"),
        ],
        Profile::T4 => &[
            ("nvidia.com/gpu.present", "true"),
            ("nvidia.com/gpu.deploy.driver", "true"),
            ("nvidia.com/gpu.deploy.gpu-feature-discovery", "true"),
            ("nvidia.com/gpu.deploy.container-toolkit", "true"),
            ("nvidia.com/gpu.deploy.device-plugin", "true"),
            ("nvidia.com/gpu.deploy.dcgm", "true"),
            ("nvidia.com/gpu.deploy.dcgm-exporter", "true"),
            ("nvidia.com/gpu.deploy.node-status-exporter", "true"),
            ("nvidia.com/gpu.deploy.operator-validator", "true"),
            ("nvidia.com/gpu.deploy.client", "true"),
        ],
        Profile::Cpu => &[],
    };
    table
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// The labels of `labels` that the operator manages.
pub fn managed(labels: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    labels
        .iter()
        .filter(|(k, _)| {
            *k == "nvidia.com/gpu.present"
                || k.starts_with("nvidia.com/gpu.deploy.")
                || *k == "nvidia.com/mig.config"
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}
