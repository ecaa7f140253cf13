//! Snapshots of the DaemonSets an NVIDIADriver renders (with a ClusterPolicy that sets
//! `driver.useNvidiaDriverCRD: true`): a GPU driver for one node pool on the mixed fleet of the
//! local cluster, the vGPU host manager, and precompiled drivers on the two-kernel fleet.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use gpu_operator_api::{ClusterPolicySpec, NvidiaDriver};
use gpu_operator_core::{
    cache::facts::ClusterFacts,
    contract::{Cluster, Operand as _},
    fixtures,
};
use gpu_operator_driver::NvidiaDriverOperand;
use serde_json::json;

/// The facts of `profile`, every GPU node served by the NVIDIADriver `pool-a`.
fn facts(profile: &str) -> ClusterFacts {
    let facts = fixtures::profiles()
        .into_iter()
        .find(|p| p.name == profile)
        .unwrap()
        .facts;
    fixtures::served_by(facts, "pool-a")
}

fn render(spec: &serde_json::Value, facts: &ClusterFacts) -> serde_yaml::Value {
    let mut cr: NvidiaDriver = serde_json::from_value(json!({
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "NVIDIADriver",
        "metadata": {"name": "pool-a", "uid": "8c5b3e0e-6f1d-4b7a-9d2c-1f0e2a3b4c5d"},
        "spec": spec,
    }))
    .unwrap();
    cr.metadata.generation = Some(1);
    let mut policy = ClusterPolicySpec::default();
    policy.driver.use_nvidia_driver_crd = Some(true);
    let image_env = |name: &str| {
        (name == "DRIVER_MANAGER_IMAGE")
            .then(|| "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.12.0".to_owned())
    };
    let cluster = Cluster {
        namespace: "gpu-operator",
        facts,
        image_env: &image_env,
        config_maps: &|_| None,
        policy: Some(&policy),
        server: gpu_operator_core::cache::server_facts::ServerFacts::unknown(),
    };
    let input = NvidiaDriverOperand::validate(&cr, &cluster)
        .unwrap()
        .unwrap();
    let children = NvidiaDriverOperand::render(&input);
    assert_eq!(children.len(), children.daemonsets.len(), "DaemonSets only");
    serde_yaml::to_value(&children.daemonsets).unwrap()
}

#[test]
fn a_gpu_driver_for_one_pool() {
    let spec = json!({
        "image": "nvcr.io/nvidia/driver:595.91.07",
        "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        "tolerations": [{"key": "pool", "operator": "Exists", "effect": "NoSchedule"}],
        "labels": {"team": "ml"},
    });
    insta::assert_yaml_snapshot!(render(&spec, &facts("h100-ubuntu22.04-containerd")));
}

#[test]
fn the_vgpu_host_manager() {
    let spec = json!({
        "driverType": "vgpu-host-manager",
        "image": "registry.local/vgpu-manager:595.91.07",
    });
    insta::assert_yaml_snapshot!(render(&spec, &facts("a100-rhel9.4-crio")));
}

#[test]
fn precompiled_drivers_per_kernel() {
    let spec = json!({
        "usePrecompiled": true,
        "repository": "nvcr.io/nvidia",
        "image": "driver",
        "version": "570",
        "kernelModuleType": "open",
    });
    insta::assert_yaml_snapshot!(render(&spec, &facts("ubuntu22.04-two-kernels")));
}
