//! The cleanup's decisions on nodes as the operator, its agents, people and other components
//! leave them. The expected keys are written out by hand (NVIDIA's names), not taken from the
//! constants under test.

use super::*;

/// A managed-fields entry of `manager` owning `labels` and `annotations`.
fn entry(manager: &str, labels: &[&str], annotations: &[&str]) -> Value {
    let keys = |keys: &[&str]| -> Map<String, Value> {
        keys.iter().map(|k| (format!("f:{k}"), json!({}))).collect()
    };
    json!({"manager": manager, "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1",
           "fieldsV1": {"f:metadata": {"f:labels": keys(labels), "f:annotations": keys(annotations)}}})
}

fn node(labels: &[(&str, &str)], annotations: &[(&str, &str)], managed: &[Value]) -> Node {
    let map = |pairs: &[(&str, &str)]| -> Map<String, Value> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), json!(v)))
            .collect()
    };
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "gpu-0",
            "labels": map(labels),
            "annotations": map(annotations),
            "managedFields": managed,
        },
    }))
    .unwrap()
}

fn sorted(keys: &BTreeSet<String>) -> Vec<&str> {
    keys.iter().map(String::as_str).collect()
}

/// A GPU node after a default install converged with driver upgrades on, a person's two labels
/// and GFD's (through NFD) label.
fn converged() -> Node {
    let mut node = node(
        &[
            ("kubernetes.io/hostname", "gpu-0"),
            ("nvidia.com/gpu.present", "true"),
            ("nvidia.com/gpu.deploy.device-plugin", "true"),
            ("nvidia.com/gpu.deploy.operator-validator", "true"),
            ("nvidia.com/gpu.deploy.driver", "false"),
            ("nvidia.com/mig.config", "all-1g.10gb"),
            ("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"),
            ("nvidia.com/gpu-driver-upgrade-state", "upgrade-done"),
            ("feature.node.kubernetes.io/pci-10de.present", "true"),
        ],
        &[
            ("nvidia.com/gpu-driver-upgrade-enabled", "true"),
            (
                "nvidia.com/gpu-driver-upgrade.state-since",
                "2026-11-27T14:00:00Z",
            ),
            (
                "nvidia.com/gpu-operator.validation",
                "GPUStackReady=True/Ready",
            ),
            ("node.alpha.kubernetes.io/ttl", "0"),
        ],
        &[
            entry(
                "kubelet",
                &["kubernetes.io/hostname"],
                &["node.alpha.kubernetes.io/ttl"],
            ),
            entry(
                "gpu-operator/node-labels",
                &[
                    "nvidia.com/gpu.present",
                    "nvidia.com/gpu.deploy.device-plugin",
                    "nvidia.com/gpu.deploy.operator-validator",
                ],
                &[],
            ),
            // The person changed the labeller's `true`, which moved the key to them.
            entry(
                "kubectl-label",
                &["nvidia.com/gpu.deploy.driver", "nvidia.com/mig.config"],
                &[],
            ),
            entry("nfd-master", &["nvidia.com/gpu.product"], &[]),
            entry(
                "gpu-operator/driver-upgrade",
                &["nvidia.com/gpu-driver-upgrade-state"],
                &[
                    "nvidia.com/gpu-driver-upgrade-enabled",
                    "nvidia.com/gpu-driver-upgrade.state-since",
                ],
            ),
            entry(
                "gpu-operator/validator",
                &[],
                &["nvidia.com/gpu-operator.validation"],
            ),
            entry(
                "gpu-operator-node-discovery",
                &["feature.node.kubernetes.io/pci-10de.present"],
                &[],
            ),
        ],
    );
    node.status = Some(
        serde_json::from_value(json!({"conditions": [
            {"type": "Ready", "status": "True"},
            {"type": "GPUDriverReady", "status": "True"},
            {"type": "GPUStackReady", "status": "True"},
            {"type": "GPUVfioPciReady", "status": "True"},
        ]}))
        .unwrap(),
    );
    node
}

#[test]
fn a_converged_node_loses_every_key_of_ours_and_keeps_the_others() {
    let cleanup = node_cleanup(&converged());
    assert_eq!(
        sorted(&cleanup.labels),
        [
            "feature.node.kubernetes.io/pci-10de.present",
            "nvidia.com/gpu-driver-upgrade-state",
            "nvidia.com/gpu.deploy.device-plugin",
            "nvidia.com/gpu.deploy.operator-validator",
            "nvidia.com/gpu.present",
        ]
    );
    assert_eq!(
        sorted(&cleanup.annotations),
        [
            "nvidia.com/gpu-driver-upgrade-enabled",
            "nvidia.com/gpu-driver-upgrade.state-since",
            "nvidia.com/gpu-operator.validation",
        ]
    );
    assert_eq!(
        sorted(&cleanup.conditions),
        ["GPUDriverReady", "GPUStackReady", "GPUVfioPciReady"]
    );
    assert!(!cleanup.uncordon);
}

#[test]
fn the_patches_remove_exactly_the_keys_and_conditions() {
    let cleanup = node_cleanup(&converged());
    assert_eq!(
        cleanup.node_patch().unwrap(),
        json!({"metadata": {
            "labels": {
                "feature.node.kubernetes.io/pci-10de.present": null,
                "nvidia.com/gpu-driver-upgrade-state": null,
                "nvidia.com/gpu.deploy.device-plugin": null,
                "nvidia.com/gpu.deploy.operator-validator": null,
                "nvidia.com/gpu.present": null,
            },
            "annotations": {
                "nvidia.com/gpu-driver-upgrade-enabled": null,
                "nvidia.com/gpu-driver-upgrade.state-since": null,
                "nvidia.com/gpu-operator.validation": null,
            },
        }})
    );
    assert_eq!(
        cleanup.status_patch().unwrap(),
        json!({"status": {"conditions": [
            {"type": "GPUDriverReady", "$patch": "delete"},
            {"type": "GPUStackReady", "$patch": "delete"},
            {"type": "GPUVfioPciReady", "$patch": "delete"},
        ]}})
    );
}

#[test]
fn a_key_a_person_also_set_stays() {
    let node = node(
        &[("nvidia.com/gpu.deploy.dcgm", "true")],
        &[],
        &[
            entry(
                "gpu-operator/node-labels",
                &["nvidia.com/gpu.deploy.dcgm"],
                &[],
            ),
            entry("kubectl-label", &["nvidia.com/gpu.deploy.dcgm"], &[]),
        ],
    );
    assert!(node_cleanup(&node).is_empty());
}

#[test]
fn upgrade_and_validator_keys_written_without_a_field_manager_go_by_name() {
    // An earlier release patched without naming a field manager; NVIDIA's operator writes the
    // same upgrade keys.
    let node = node(
        &[
            ("nvidia.com/gpu-driver-upgrade-state", "upgrade-failed"),
            ("nvidia.com/gpu-driver-upgrade.skip", "true"),
            ("nvidia.com/something-else", "x"),
        ],
        &[
            ("nvidia.com/gpu-driver-upgrade-enabled", "true"),
            (
                "nvidia.com/gpu-driver-upgrade.failure-reason",
                "validation timed out",
            ),
            ("nvidia.com/gpu-driver-upgrade.restart-pod-uid", "1234"),
            (
                "nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable",
                "true",
            ),
            ("nvidia.com/gpu-driver-upgrade-requested", "true"),
            (
                "nvidia.com/gpu-operator.validation",
                "GPUStackReady=False/x",
            ),
        ],
        &[entry(
            "",
            &[
                "nvidia.com/gpu-driver-upgrade-state",
                "nvidia.com/something-else",
            ],
            &["nvidia.com/gpu-driver-upgrade-enabled"],
        )],
    );
    let cleanup = node_cleanup(&node);
    assert_eq!(
        sorted(&cleanup.labels),
        ["nvidia.com/gpu-driver-upgrade-state"]
    );
    assert_eq!(
        sorted(&cleanup.annotations),
        [
            "nvidia.com/gpu-driver-upgrade-enabled",
            "nvidia.com/gpu-driver-upgrade.failure-reason",
            "nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable",
            "nvidia.com/gpu-driver-upgrade.restart-pod-uid",
            "nvidia.com/gpu-operator.validation",
        ],
        "the user's request and skip label stay"
    );
}

#[test]
fn deploy_labels_paused_by_an_operand_go_and_a_persons_false_stays() {
    let node = node(
        &[
            (
                "nvidia.com/gpu.deploy.device-plugin",
                "paused-for-mig-change",
            ),
            ("nvidia.com/gpu.deploy.driver", "paused-for-driver-upgrade"),
            ("nvidia.com/gpu.deploy.dcgm", "false"),
            ("nvidia.com/mig.config.state", "pending"),
        ],
        &[],
        &[entry(
            "nvidia-mig-manager",
            &[
                "nvidia.com/gpu.deploy.device-plugin",
                "nvidia.com/mig.config.state",
            ],
            &[],
        )],
    );
    assert_eq!(
        sorted(&node_cleanup(&node).labels),
        [
            "nvidia.com/gpu.deploy.device-plugin",
            "nvidia.com/gpu.deploy.driver",
        ]
    );
}

#[test]
fn a_key_no_longer_on_the_node_is_not_patched() {
    let node = node(
        &[],
        &[],
        &[entry(
            "gpu-operator/node-labels",
            &["nvidia.com/gpu.present"],
            &[],
        )],
    );
    let cleanup = node_cleanup(&node);
    assert!(cleanup.is_empty());
    assert_eq!(cleanup.node_patch(), None);
    assert_eq!(cleanup.status_patch(), None);
}

#[test]
fn the_upgrades_cordon_is_lifted_and_a_cordon_from_before_stays() {
    let cordoned = |state: &str, before: Option<&str>| {
        let mut annotations = vec![];
        if let Some(before) = before {
            annotations.push((
                "nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable",
                before,
            ));
        }
        let mut node = node(
            &[("nvidia.com/gpu-driver-upgrade-state", state)],
            &annotations,
            &[],
        );
        node.spec = Some(serde_json::from_value(json!({"unschedulable": true})).unwrap());
        node_cleanup(&node).uncordon
    };
    for state in [
        "cordon-required",
        "wait-for-jobs-required",
        "pod-deletion-required",
        "drain-required",
        "pod-restart-required",
        "validation-required",
        "uncordon-required",
        "upgrade-failed",
    ] {
        assert!(cordoned(state, None), "{state}: the upgrade's cordon stays");
        assert!(
            !cordoned(state, Some("true")),
            "{state}: the user's cordon is lifted"
        );
    }
    for state in ["upgrade-required", "upgrade-done", "unknown"] {
        assert!(
            !cordoned(state, None),
            "{state}: a cordon the upgrade did not make is lifted"
        );
    }
    let cleanup = NodeCleanup {
        uncordon: true,
        ..NodeCleanup::default()
    };
    assert_eq!(
        cleanup.node_patch().unwrap(),
        json!({"spec": {"unschedulable": null}})
    );
}

#[test]
fn our_writers_field_managers_count_as_ours() {
    for manager in [
        gpu_operator_node_labels::reconcile::FIELD_MANAGER,
        gpu_operator_driver_upgrade::FIELD_MANAGER,
        gpu_operator_validator::node_conditions::FIELD_MANAGER,
        gpu_operator_validator::discovery::plan::FIELD_MANAGER,
    ] {
        assert!(is_ours(manager), "{manager}");
    }
    for manager in [
        "kubectl-label",
        "nfd-master",
        "gpu-operator",
        "",
        "nvidia-mig-manager",
    ] {
        assert!(!is_ours(manager), "{manager}");
    }
}
