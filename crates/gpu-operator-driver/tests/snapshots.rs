//! Snapshots of the driver's rendered objects for every example ClusterPolicy × node profile, with
//! precompiled drivers on the two-kernel fleet, and the default ClusterPolicy on the local
//! cluster's mixed fleet (one DaemonSet per OS).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use gpu_operator_api::ClusterPolicySpec;
use gpu_operator_core::{
    cache::facts::ClusterFacts,
    contract::{Children, Cluster, Operand as _},
    fixtures,
};
use gpu_operator_driver::Driver;
use serde::Deserialize as _;

fn render(spec: &ClusterPolicySpec, facts: &ClusterFacts) -> Children {
    let image_env = |name: &str| match name {
        "DRIVER_IMAGE" => Some("nvcr.io/nvidia/driver:595.91.07".to_owned()),
        "DRIVER_MANAGER_IMAGE" => {
            Some("nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.12.0".to_owned())
        }
        _ => None,
    };
    let cluster = Cluster {
        namespace: "gpu-operator",
        facts,
        image_env: &image_env,
        config_maps: &|_| None,
        policy: None,
        server: gpu_operator_core::cache::server_facts::ServerFacts::unknown(),
    };
    Driver::validate(spec, &cluster)
        .unwrap()
        .map(|input| Driver::render(&input))
        .unwrap_or_default()
}

fn yaml(children: &Children) -> serde_yaml::Value {
    serde_yaml::to_value(serde_yaml::Mapping::from_iter([
        (
            "serviceAccounts".into(),
            serde_yaml::to_value(&children.service_accounts).unwrap(),
        ),
        (
            "roles".into(),
            serde_yaml::to_value(&children.roles).unwrap(),
        ),
        (
            "roleBindings".into(),
            serde_yaml::to_value(&children.role_bindings).unwrap(),
        ),
        (
            "clusterRoles".into(),
            serde_yaml::to_value(&children.cluster_roles).unwrap(),
        ),
        (
            "clusterRoleBindings".into(),
            serde_yaml::to_value(&children.cluster_role_bindings).unwrap(),
        ),
        (
            "configMaps".into(),
            serde_yaml::to_value(&children.config_maps).unwrap(),
        ),
        (
            "daemonSets".into(),
            serde_yaml::to_value(&children.daemonsets).unwrap(),
        ),
    ]))
    .unwrap()
}

#[test]
fn examples_by_profile() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let snapshots =
        fixtures::distinct_snapshots(&root, |spec, facts| Ok(yaml(&render(spec, facts)))).unwrap();
    for (name, rendered) in snapshots.cases {
        insta::assert_yaml_snapshot!(name, rendered);
    }
    insta::assert_yaml_snapshot!("matrix", snapshots.matrix);
}

#[test]
fn precompiled_on_two_kernels_and_the_local_mixed_fleet() {
    let two_kernels = fixtures::profiles()
        .into_iter()
        .find(|p| p.name == "ubuntu22.04-two-kernels")
        .unwrap();
    let mut spec = ClusterPolicySpec::default();
    spec.driver.use_precompiled = Some(true);
    spec.driver.image.repository = Some("nvcr.io/nvidia".into());
    spec.driver.image.name = Some("driver".into());
    spec.driver.image.version = Some("570".into());
    let names = |c: &Children| -> Vec<String> {
        c.daemonsets
            .iter()
            .map(|d| d.metadata.name.clone().unwrap())
            .collect()
    };
    let precompiled = render(&spec, &two_kernels.facts);
    assert_eq!(names(&precompiled).len(), 2);
    insta::assert_yaml_snapshot!("precompiled-two-kernels", yaml(&precompiled));

    let mut mixed = ClusterFacts::default();
    for profile in fixtures::profiles().into_iter().take(3) {
        let f = profile.facts;
        mixed.gpu_nodes += f.gpu_nodes;
        mixed.os_releases.extend(f.os_releases);
        mixed.kernels.extend(f.kernels);
        mixed.os_kernels.extend(f.os_kernels);
        mixed.runtimes.extend(f.runtimes);
        mixed.os_runtimes.extend(f.os_runtimes);
    }
    let children = render(&ClusterPolicySpec::default(), &mixed);
    assert_eq!(
        names(&children),
        [
            "nvidia-driver-daemonset-rhel9.4",
            "nvidia-driver-daemonset-ubuntu22.04",
            "nvidia-driver-daemonset-ubuntu24.04"
        ]
    );
    insta::assert_yaml_snapshot!("default-mixed-fleet", yaml(&children));
}

/// Switching from NVIDIA's operator restarts no driver: our render of NVIDIA's v26.7.0 default
/// ClusterPolicy installs what NVIDIA's own driver DaemonSet (as the API server stored it, with its
/// defaults filled in) installs, so its pods are in sync (`e2e/fixtures/nvidia-v26.7.0`).
#[test]
fn nvidias_adopted_driver_pods_are_in_sync_with_our_render() {
    let fixture =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../e2e/fixtures/nvidia-v26.7.0");
    let read = |file: &str| std::fs::read_to_string(fixture.join(file)).unwrap();
    let policy: serde_yaml::Value = serde_yaml::from_str(&read("clusterpolicy.yaml")).unwrap();
    let spec: ClusterPolicySpec = serde_yaml::from_value(policy["spec"].clone()).unwrap();
    let objects: Vec<serde_yaml::Value> = serde_yaml::Deserializer::from_str(&read("objects.yaml"))
        .map(|doc| serde_yaml::Value::deserialize(doc).unwrap())
        .flat_map(|doc: serde_yaml::Value| match doc["kind"].as_str() {
            Some("List") => doc["items"].as_sequence().cloned().unwrap_or_default(),
            _ => vec![doc],
        })
        .collect();
    let nvidia = objects
        .iter()
        .find(|o| o["kind"] == "DaemonSet" && o["metadata"]["name"] == "nvidia-driver-daemonset")
        .unwrap();
    let nvidia: k8s_openapi::api::apps::v1::DaemonSet =
        serde_yaml::from_value(nvidia.clone()).unwrap();
    let h100 = fixtures::profiles()
        .into_iter()
        .find(|p| p.name.starts_with("h100-ubuntu22.04"))
        .unwrap();
    let ours = render(&spec, &h100.facts).daemonsets.remove(0);
    let fingerprint = gpu_operator_driver::in_sync::template_fingerprint;
    assert_eq!(fingerprint(&ours), fingerprint(&nvidia));
}
