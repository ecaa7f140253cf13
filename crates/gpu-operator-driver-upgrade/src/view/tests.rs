//! What wakes an upgrade pass of a node: only what the state machine reads of it.

use k8s_openapi::api::core::v1::{Node, NodeSpec};
use serde_json::json;

use crate::view::UpgradeNode;

/// A GPU node with `labels`, `annotations` and cordon `unschedulable`, as the upgrade cache holds
/// it.
fn trigger(
    labels: &serde_json::Value,
    annotations: &serde_json::Value,
    cordoned: bool,
) -> UpgradeNode {
    let mut node: Node = serde_json::from_value(json!({
        "metadata": {"name": "gpu-1", "resourceVersion": "1", "labels": labels, "annotations": annotations},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }))
    .unwrap();
    node.spec = Some(NodeSpec {
        unschedulable: Some(cordoned),
        ..NodeSpec::default()
    });
    UpgradeNode::from(node)
}

#[test]
fn a_pass_is_woken_by_the_upgrade_labels_annotations_and_cordon_and_by_nothing_else() {
    // Label and annotation names by hand, as NVIDIA's runbooks spell them.
    let labels = json!({
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu-driver-upgrade-state": "upgrade-done",
        "feature.node.kubernetes.io/cpu-model.id": "143",
    });
    let annotations = json!({"nvidia.com/gpu-driver-upgrade-enabled": "true"});
    let base = trigger(&labels, &annotations, false);

    // Labels and annotations that NFD, GFD, autoscalers and users keep changing.
    let mut unrelated = labels.clone();
    unrelated["feature.node.kubernetes.io/cpu-model.id"] = json!("207");
    unrelated["e2e.gpu-operator/unrelated"] = json!("flip");
    unrelated["nvidia.com/gpu.product"] = json!("NVIDIA-H100-80GB-HBM3");
    let mut other_annotations = annotations.clone();
    other_annotations["cluster-autoscaler.kubernetes.io/scale-down-disabled"] = json!("true");
    assert!(!UpgradeNode::upgrade_inputs_changed(
        &base,
        &trigger(&unrelated, &other_annotations, false)
    ));

    // Positive controls: each thing the state machine reads wakes it.
    let mut state = labels.clone();
    state["nvidia.com/gpu-driver-upgrade-state"] = json!("upgrade-required");
    let mut skip = labels.clone();
    skip["nvidia.com/gpu-driver-upgrade.skip"] = json!("true");
    let requested = json!({
        "nvidia.com/gpu-driver-upgrade-enabled": "true",
        "nvidia.com/gpu-driver-upgrade-requested": "true",
    });
    for (what, node) in [
        ("the state label", trigger(&state, &annotations, false)),
        ("the skip label", trigger(&skip, &annotations, false)),
        (
            "the requested annotation",
            trigger(&labels, &requested, false),
        ),
        ("the cordon", trigger(&labels, &annotations, true)),
    ] {
        assert!(
            UpgradeNode::upgrade_inputs_changed(&base, &node),
            "{what} changed but would wake no pass"
        );
    }
}

/// A GPU node named `name` with `labels`, as the upgrade cache holds it.
fn cached(name: &str, labels: &serde_json::Value) -> std::sync::Arc<UpgradeNode> {
    let node: Node =
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap();
    std::sync::Arc::new(UpgradeNode::from(node))
}

#[test]
fn the_driver_node_count_is_of_nodes_not_of_the_driver_pods_that_came_up_so_far() {
    use crate::facts::NodeFacts;
    // By hand: what the node labeller writes on GPU nodes, and on one with a host driver.
    let nodes = [
        cached("a", &json!({"nvidia.com/gpu.deploy.driver": "true"})),
        cached("b", &json!({"nvidia.com/gpu.deploy.driver": "true"})),
        cached(
            "c",
            &json!({"nvidia.com/gpu.deploy.driver": "pre-installed"}),
        ),
        cached("d", &json!({})),
    ];
    let facts = |names: &[&str]| -> Vec<NodeFacts> {
        names
            .iter()
            .map(|n| NodeFacts {
                name: (*n).to_owned(),
                state: Some(crate::state::UpgradeState::Done),
                ..NodeFacts::default()
            })
            .collect()
    };
    // Before any driver pod, while they come up, and with one left on a node no longer labelled.
    assert_eq!(crate::view::driver_nodes(&nodes, &[]), 2);
    assert_eq!(crate::view::driver_nodes(&nodes, &facts(&["a"])), 2);
    assert_eq!(
        crate::view::driver_nodes(&nodes, &facts(&["a", "b", "d"])),
        3
    );
}
