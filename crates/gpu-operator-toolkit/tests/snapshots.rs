//! Snapshots of the toolkit's rendered objects for every example ClusterPolicy × node profile
//! (containerd, CRI-O and Docker nodes), and what stays while the toolkit is disabled.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use gpu_operator_api::ClusterPolicySpec;
use gpu_operator_core::{
    cache::facts::ClusterFacts,
    contract::{Children, Cluster, Operand as _},
    fixtures,
};
use gpu_operator_toolkit::Toolkit;

fn render(spec: &ClusterPolicySpec, facts: &ClusterFacts) -> Children {
    let image_env = |name: &str| match name {
        "CONTAINER_TOOLKIT_IMAGE" => {
            Some("nvcr.io/nvidia/k8s/container-toolkit:v1.20.0".to_owned())
        }
        "VALIDATOR_IMAGE" => Some("ghcr.io/example/gpu-operator:v0.1.0".to_owned()),
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
    match Toolkit::validate(spec, &cluster).unwrap() {
        Some(input) => Toolkit::render(&input),
        None => Toolkit::render_disabled(spec, &cluster),
    }
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
            "configMaps".into(),
            serde_yaml::to_value(&children.config_maps).unwrap(),
        ),
        (
            "runtimeClasses".into(),
            serde_yaml::to_value(&children.runtime_classes).unwrap(),
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
fn a_disabled_toolkit_keeps_only_the_runtime_classes() {
    let mut spec = ClusterPolicySpec::default();
    spec.toolkit.enabled = Some(false);
    let facts = &fixtures::profiles()[0].facts;
    let children = render(&spec, facts);
    assert!(children.daemonsets.is_empty());
    let names: Vec<String> = children
        .runtime_classes
        .iter()
        .map(|r| r.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["nvidia", "nvidia-cdi", "nvidia-legacy"]);
    assert_eq!(children.len(), 3);
}
