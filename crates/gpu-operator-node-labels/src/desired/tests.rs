//! Every labelling rule, on the reference fleet's node profiles.

use std::collections::BTreeMap;

use gpu_operator_api::spec::{SandboxMode, WorkloadConfig};

use super::fixtures::*;
use super::*;

const PRESENT: &str = "nvidia.com/gpu.present";
const MIG_MANAGER: &str = "nvidia.com/gpu.deploy.mig-manager";
const CLIENT: &str = "nvidia.com/gpu.deploy.client";
const MIG_CONFIG: &str = "nvidia.com/mig.config";

/// The container deploy labels (with `client`) set to `true`.
fn container_true() -> LabelChanges {
    CONTAINER_DEPLOY_TRUE
        .iter()
        .map(|(k, _)| *k)
        .chain([CLIENT])
        .map(|k| (k.to_owned(), Some("true".to_owned())))
        .collect()
}

fn changes(pairs: &[(&str, Option<&str>)]) -> LabelChanges {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.map(str::to_owned)))
        .collect()
}

fn applied(node: &BTreeMap<String, String>, changes: &LabelChanges) -> BTreeMap<String, String> {
    let mut out = node.clone();
    for (key, value) in changes {
        match value {
            Some(value) => out.insert(key.clone(), value.clone()),
            None => out.remove(key),
        };
    }
    out
}

/// Applies the changes and checks that a second pass has nothing left to do.
fn converge(
    node: &BTreeMap<String, String>,
    policy: &ClusterPolicySpec,
) -> BTreeMap<String, String> {
    let after = applied(node, &label_changes(node, policy));
    assert_eq!(
        label_changes(&after, policy),
        LabelChanges::new(),
        "not idempotent from {node:#?}"
    );
    after
}

fn deploy_keys(node: &BTreeMap<String, String>) -> Vec<&str> {
    node.keys()
        .map(String::as_str)
        .filter(|k| k.starts_with("nvidia.com/gpu.deploy."))
        .collect()
}

#[test]
fn a_fresh_h100_node_gets_presence_every_container_gate_mig_manager_and_the_mig_seed() {
    let mut expected = container_true();
    expected.extend(changes(&[
        (PRESENT, Some("true")),
        (MIG_MANAGER, Some("true")),
        (MIG_CONFIG, Some("all-disabled")),
    ]));
    assert_eq!(label_changes(&n1_h100_fresh(), &default_policy()), expected);
}

#[test]
fn a_node_labelled_by_an_older_nvidia_operator_only_gains_the_client_gate() {
    let expected = changes(&[(CLIENT, Some("true"))]);
    assert_eq!(
        label_changes(&n1_h100_labelled(), &default_policy()),
        expected
    );
    let converged = converge(&n1_h100_labelled(), &default_policy());
    assert_eq!(
        label_changes(&converged, &default_policy()),
        LabelChanges::new()
    );
}

#[test]
fn paused_values_and_a_chosen_mig_layout_are_never_overwritten() {
    assert_eq!(
        label_changes(&n1_pending(), &default_policy()),
        LabelChanges::new()
    );
    for value in [
        "false",
        "pre-installed",
        "paused-for-driver-upgrade",
        "anything",
    ] {
        let node = with(
            &n1_h100_labelled(),
            &[
                (CLIENT, "true"),
                ("nvidia.com/gpu.deploy.driver", value),
                (MIG_MANAGER, value),
            ],
            &[],
        );
        assert_eq!(
            label_changes(&node, &default_policy()),
            LabelChanges::new(),
            "{value}"
        );
    }
}

#[test]
fn empty_values_count_as_absent() {
    let node = with(
        &n1_h100_labelled(),
        &[
            ("nvidia.com/gpu.deploy.device-plugin", ""),
            (MIG_MANAGER, ""),
            (MIG_CONFIG, ""),
        ],
        &[],
    );
    let expected = changes(&[
        (CLIENT, Some("true")),
        ("nvidia.com/gpu.deploy.device-plugin", Some("true")),
        (MIG_MANAGER, Some("true")),
        (MIG_CONFIG, Some("all-disabled")),
    ]);
    assert_eq!(label_changes(&node, &default_policy()), expected);
}

#[test]
fn an_a100_node_keeps_its_mig_layout_and_gets_mig_manager() {
    let mut expected = container_true();
    expected.extend(changes(&[
        (PRESENT, Some("true")),
        (MIG_MANAGER, Some("true")),
    ]));
    assert_eq!(label_changes(&n2_a100_fresh(), &default_policy()), expected);
}

#[test]
fn a_preinstalled_driver_t4_keeps_driver_and_gets_no_mig_manager_or_mig_config() {
    let mut expected = container_true();
    expected.remove("nvidia.com/gpu.deploy.driver");
    assert_eq!(label_changes(&n3_t4(), &default_policy()), expected);
    let after = converge(&n3_t4(), &default_policy());
    assert_eq!(after["nvidia.com/gpu.deploy.driver"], "pre-installed");
    assert!(!after.contains_key(MIG_MANAGER) && !after.contains_key(MIG_CONFIG));
    // A mig-manager gate put there by someone else is not swept on a container node.
    let manual = with(&after, &[(MIG_MANAGER, "true")], &[]);
    assert_eq!(
        label_changes(&manual, &default_policy()),
        LabelChanges::new()
    );
}

#[test]
fn any_of_the_three_nfd_pci_labels_marks_a_gpu_node() {
    for pci in [
        "feature.node.kubernetes.io/pci-10de.present",
        "feature.node.kubernetes.io/pci-0302_10de.present",
        "feature.node.kubernetes.io/pci-0300_10de.present",
    ] {
        let bare = with(
            &n3_t4(),
            &[],
            &["feature.node.kubernetes.io/pci-10de.present", PRESENT],
        );
        let node = with(&bare, &[(pci, "true")], &[]);
        let changes = label_changes(&node, &default_policy());
        assert_eq!(changes[PRESENT], Some("true".to_owned()), "{pci}");
        assert_eq!(changes[CLIENT], Some("true".to_owned()), "{pci}");
    }
    let not_true = with(
        &n4_cpu(),
        &[("feature.node.kubernetes.io/pci-10de.present", "false")],
        &[],
    );
    assert_eq!(
        label_changes(&not_true, &default_policy()),
        LabelChanges::new()
    );
}

#[test]
fn a_cpu_only_node_is_left_alone() {
    assert_eq!(
        label_changes(&n4_cpu(), &default_policy()),
        LabelChanges::new()
    );
    let once_false = with(&n4_cpu(), &[(PRESENT, "false")], &[]);
    assert_eq!(
        label_changes(&once_false, &default_policy()),
        LabelChanges::new()
    );
    for policy in [
        mig_policy(Some(true), Some("all-1g.10gb")),
        sandbox_policy(None, None),
    ] {
        assert_eq!(label_changes(&n4_cpu(), &policy), LabelChanges::new());
    }
}

#[test]
fn a_former_gpu_node_flips_presence_to_false_and_loses_every_gate() {
    let node = with(
        &n4_former_gpu(),
        &[(CLIENT, "true"), ("nvidia.com/gpu.deploy.operands", "true")],
        &[],
    );
    let after = converge(&node, &default_policy());
    assert_eq!(after[PRESENT], "false", "flipped, not removed");
    assert_eq!(deploy_keys(&after), ["nvidia.com/gpu.deploy.operands"]);
    // The MIG layout and GFD's labels belong to others; only the gates go.
    assert_eq!(after[MIG_CONFIG], "all-disabled");
    assert_eq!(after["nvidia.com/gpu.product"], "NVIDIA-H100-80GB-HBM3");
    // And once it is not a GPU node, nothing more happens.
    assert_eq!(
        label_changes(&after, &default_policy()),
        LabelChanges::new()
    );
}

#[test]
fn stale_gates_on_a_node_that_never_had_gpu_present_are_removed() {
    let node = with(&n4_cpu(), &[("nvidia.com/gpu.deploy.driver", "true")], &[]);
    let expected = changes(&[("nvidia.com/gpu.deploy.driver", None)]);
    assert_eq!(label_changes(&node, &default_policy()), expected);
}

#[test]
fn a_gpu_node_marked_false_becomes_true_again_when_nfd_reports_the_gpu() {
    let node = with(&n1_h100_fresh(), &[(PRESENT, "false")], &[]);
    let changes = label_changes(&node, &default_policy());
    assert_eq!(changes[PRESENT], Some("true".to_owned()));
    assert_eq!(changes[MIG_MANAGER], Some("true".to_owned()));
}

#[test]
fn operands_false_removes_every_managed_gate_but_not_others() {
    let node = with(
        &n1_h100_labelled(),
        &[
            ("nvidia.com/gpu.deploy.operands", "false"),
            ("nvidia.com/gpu.deploy.driver", "pre-installed"),
            ("nvidia.com/gpu.deploy.sandbox-device-plugin", "true"),
            ("nvidia.com/gpu.deploy.nvsm", "true"),
        ],
        &[],
    );
    let after = converge(&node, &default_policy());
    assert_eq!(
        deploy_keys(&after),
        [
            "nvidia.com/gpu.deploy.nvsm",
            "nvidia.com/gpu.deploy.operands"
        ]
    );
    assert_eq!(after[PRESENT], "true");
    // A fresh node opted out gets presence and (as NVIDIA does) its MIG seed, but no gate.
    let fresh = with(
        &n1_h100_fresh(),
        &[("nvidia.com/gpu.deploy.operands", "false")],
        &[],
    );
    let expected = changes(&[(PRESENT, Some("true")), (MIG_CONFIG, Some("all-disabled"))]);
    assert_eq!(label_changes(&fresh, &default_policy()), expected);
    // Any other value of the operands label changes nothing.
    let on = with(
        &n1_h100_fresh(),
        &[("nvidia.com/gpu.deploy.operands", "true")],
        &[],
    );
    assert!(label_changes(&on, &default_policy()).contains_key(MIG_MANAGER));
}

#[test]
fn a_vgpu_host_is_never_mig_capable() {
    let mut expected = container_true();
    expected.insert(PRESENT.to_owned(), Some("true".to_owned()));
    assert_eq!(label_changes(&vgpu_host(), &default_policy()), expected);
    let with_gfd = with(&vgpu_host(), &[("nvidia.com/mig.capable", "true")], &[]);
    assert!(!label_changes(&with_gfd, &default_policy()).contains_key(MIG_MANAGER));
}

#[test]
fn the_product_name_decides_mig_capability_when_gfd_has_not_said() {
    let node = with(&n1_h100_fresh(), &[], &["nvidia.com/mig.capable"]);
    assert_eq!(
        label_changes(&node, &default_policy())[MIG_MANAGER],
        Some("true".to_owned())
    );
    let a30 = with(
        &n3_t4(),
        &[("nvidia.com/gpu.product", "NVIDIA-A30")],
        &["nvidia.com/mig.capable"],
    );
    let changes = label_changes(&a30, &default_policy());
    assert_eq!(changes[MIG_MANAGER], Some("true".to_owned()));
    assert_eq!(changes[MIG_CONFIG], Some("all-disabled".to_owned()));
}

#[test]
fn the_mig_seed_follows_the_mig_manager_settings() {
    let seed = |policy: &ClusterPolicySpec| {
        label_changes(&n1_h100_fresh(), policy)
            .get(MIG_CONFIG)
            .cloned()
    };
    assert_eq!(
        seed(&default_policy()),
        Some(Some("all-disabled".to_owned()))
    );
    assert_eq!(
        seed(&mig_policy(None, None)),
        Some(Some("all-disabled".to_owned()))
    );
    assert_eq!(
        seed(&mig_policy(Some(true), Some("all-disabled"))),
        Some(Some("all-disabled".to_owned()))
    );
    // Our extension: any layout name is seeded, not only all-disabled.
    assert_eq!(
        seed(&mig_policy(None, Some("all-1g.10gb"))),
        Some(Some("all-1g.10gb".to_owned()))
    );
    assert_eq!(seed(&mig_policy(None, Some(""))), None);
    assert_eq!(seed(&mig_policy(Some(false), Some("all-disabled"))), None);
    // The gate itself does not depend on the MIG manager being enabled (as in NVIDIA's operator).
    let disabled = label_changes(&n1_h100_fresh(), &mig_policy(Some(false), None));
    assert_eq!(disabled[MIG_MANAGER], Some("true".to_owned()));
    // Not on nodes that are not MIG-capable.
    assert!(
        !label_changes(&n3_t4(), &mig_policy(None, Some("all-1g.10gb"))).contains_key(MIG_CONFIG)
    );
}

fn vm_node(config: &str) -> BTreeMap<String, String> {
    let mut node = converge(&n1_h100_fresh(), &default_policy());
    node.insert(
        "nvidia.com/gpu.workload.config".to_owned(),
        config.to_owned(),
    );
    node
}

#[test]
fn switching_a_container_node_to_vm_passthrough_swaps_the_gates() {
    let policy = sandbox_policy(None, None);
    let after = converge(&vm_node("vm-passthrough"), &policy);
    assert_eq!(
        deploy_keys(&after),
        [
            "nvidia.com/gpu.deploy.cc-manager",
            "nvidia.com/gpu.deploy.client",
            "nvidia.com/gpu.deploy.kata-manager",
            "nvidia.com/gpu.deploy.sandbox-device-plugin",
            "nvidia.com/gpu.deploy.sandbox-validator",
            "nvidia.com/gpu.deploy.vfio-manager",
        ]
    );
    // mig.config stays: NVIDIA seeds it on every MIG-capable GPU node.
    assert_eq!(after[MIG_CONFIG], "all-disabled");
}

#[test]
fn kata_mode_uses_the_kata_sandbox_device_plugin_for_passthrough_only() {
    let kata = sandbox_policy(None, Some(SandboxMode::Kata));
    let passthrough = converge(&vm_node("vm-passthrough"), &kata);
    assert!(passthrough.contains_key("nvidia.com/gpu.deploy.kata-sandbox-device-plugin"));
    assert!(!passthrough.contains_key("nvidia.com/gpu.deploy.sandbox-device-plugin"));
    // Back to kubevirt: the kata plugin gate is swept, the kubevirt one added.
    let kubevirt = label_changes(
        &passthrough,
        &sandbox_policy(None, Some(SandboxMode::Kubevirt)),
    );
    let expected = changes(&[
        ("nvidia.com/gpu.deploy.kata-sandbox-device-plugin", None),
        ("nvidia.com/gpu.deploy.sandbox-device-plugin", Some("true")),
    ]);
    assert_eq!(kubevirt, expected);
    let vgpu = converge(&vm_node("vm-vgpu"), &kata);
    assert!(vgpu.contains_key("nvidia.com/gpu.deploy.sandbox-device-plugin"));
}

#[test]
fn switching_from_passthrough_to_vgpu_keeps_shared_gates_and_their_values() {
    let policy = sandbox_policy(None, None);
    let mut node = converge(&vm_node("vm-passthrough"), &policy);
    node.insert(
        "nvidia.com/gpu.deploy.sandbox-validator".to_owned(),
        "false".to_owned(),
    );
    node.insert(
        "nvidia.com/gpu.workload.config".to_owned(),
        "vm-vgpu".to_owned(),
    );
    let expected = changes(&[
        ("nvidia.com/gpu.deploy.kata-manager", None),
        ("nvidia.com/gpu.deploy.vfio-manager", None),
        ("nvidia.com/gpu.deploy.vgpu-device-manager", Some("true")),
        ("nvidia.com/gpu.deploy.vgpu-manager", Some("true")),
    ]);
    assert_eq!(label_changes(&node, &policy), expected);
}

#[test]
fn switching_back_to_container_removes_the_vm_gates() {
    let policy = sandbox_policy(None, None);
    let mut node = converge(&vm_node("vm-vgpu"), &policy);
    node.insert(
        "nvidia.com/gpu.workload.config".to_owned(),
        "container".to_owned(),
    );
    let after = converge(&node, &policy);
    let mut expected: Vec<String> = container_true().into_keys().collect();
    expected.push(MIG_MANAGER.to_owned());
    expected.sort();
    assert_eq!(deploy_keys(&after), expected);
}

#[test]
fn the_workload_label_is_ignored_without_sandbox_workloads_and_defaults_when_invalid() {
    // Sandbox off: a vm-passthrough label changes nothing on a container node.
    assert_eq!(
        label_changes(&vm_node("vm-passthrough"), &default_policy()),
        LabelChanges::new()
    );
    // Invalid or missing label: the default workload.
    let vgpu_default = sandbox_policy(Some(WorkloadConfig::VmVgpu), None);
    for node in [
        vm_node("bogus"),
        converge(&n1_h100_fresh(), &default_policy()),
    ] {
        let after = converge(&node, &vgpu_default);
        assert!(after.contains_key("nvidia.com/gpu.deploy.vgpu-manager"));
        assert!(!after.contains_key("nvidia.com/gpu.deploy.driver"));
        assert!(
            !after.contains_key(MIG_MANAGER),
            "swept off non-container nodes"
        );
    }
    let container_default = sandbox_policy(None, None);
    let after = converge(&vm_node("bogus"), &container_default);
    assert!(after.contains_key("nvidia.com/gpu.deploy.driver"));
}

#[test]
fn every_profile_converges_in_one_pass_under_every_policy() {
    let nodes = vec![
        n1_h100_fresh(),
        n1_h100_labelled(),
        n1_pending(),
        n2_a100_fresh(),
        n3_t4(),
        n4_cpu(),
        n4_former_gpu(),
        vgpu_host(),
        vm_node("vm-passthrough"),
        vm_node("vm-vgpu"),
        vm_node("bogus"),
        with(
            &n1_h100_fresh(),
            &[("nvidia.com/gpu.deploy.operands", "false")],
            &[],
        ),
    ];
    let policies = vec![
        default_policy(),
        mig_policy(Some(false), None),
        mig_policy(None, Some("all-1g.10gb")),
        sandbox_policy(None, None),
        sandbox_policy(Some(WorkloadConfig::VmPassthrough), Some(SandboxMode::Kata)),
        sandbox_policy(Some(WorkloadConfig::VmVgpu), None),
    ];
    for node in &nodes {
        for policy in &policies {
            converge(node, policy);
        }
    }
}

mod dra;
