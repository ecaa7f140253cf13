//! The resource API rules: the DRA gates with only a GPUCluster, with a ClusterPolicy beside it
//! per node by `nvidia.com/gpu.resource-api`, and their removal when the GPUCluster goes.

use super::*;

const PLUGIN: &str = "nvidia.com/gpu.deploy.device-plugin";
const DRA_DRIVER: &str = "nvidia.com/gpu.deploy.dra-driver";
const DRA_VALIDATOR: &str = "nvidia.com/gpu.deploy.dra-validator";
const RESOURCE_API: &str = "nvidia.com/gpu.resource-api";
const DCGM: &str = "nvidia.com/gpu.deploy.dcgm";
const DCGM_EXPORTER: &str = "nvidia.com/gpu.deploy.dcgm-exporter";
const DCGM_DRA: &str = "nvidia.com/gpu.deploy.dcgm-dra";
const DCGM_EXPORTER_DRA: &str = "nvidia.com/gpu.deploy.dcgm-exporter-dra";

/// Applies the changes of [`decide_served`] and checks a second pass has nothing left to do.
fn converge_served(
    node: &BTreeMap<String, String>,
    policy: Option<&ClusterPolicySpec>,
    gpu_cluster: bool,
) -> BTreeMap<String, String> {
    let after = applied(node, &decide_served(node, policy, gpu_cluster).changes);
    assert_eq!(
        decide_served(&after, policy, gpu_cluster),
        Decision {
            changes: LabelChanges::new(),
            layout_wait: None
        },
        "not converged from {node:#?}"
    );
    after
}

fn dra_gates_true() -> [(&'static str, Option<&'static str>); 4] {
    [
        (DRA_DRIVER, Some("true")),
        (DRA_VALIDATOR, Some("true")),
        (DCGM_DRA, Some("true")),
        (DCGM_EXPORTER_DRA, Some("true")),
    ]
}

#[test]
fn without_a_gpu_cluster_nothing_changes_and_stale_dra_gates_go() {
    let policy = default_policy();
    for node in [n1_h100_fresh(), n1_h100_labelled(), n3_t4(), n4_cpu()] {
        assert_eq!(
            decide_served(&node, Some(&policy), false),
            decide(&node, &policy)
        );
    }
    let stale = with(
        &n1_h100_labelled(),
        &[
            (CLIENT, "true"),
            (DRA_DRIVER, "true"),
            (DRA_VALIDATOR, "true"),
            (DCGM_DRA, "true"),
            (DCGM_EXPORTER_DRA, "true"),
        ],
        &[PLUGIN],
    );
    assert_eq!(
        label_changes(&stale, &policy),
        changes(&[
            (PLUGIN, Some("true")),
            (DRA_DRIVER, None),
            (DRA_VALIDATOR, None),
            (DCGM_DRA, None),
            (DCGM_EXPORTER_DRA, None)
        ]),
        "the GPUCluster went: the device plugin's gate comes back"
    );
}

#[test]
fn only_a_gpu_cluster_gives_every_gpu_node_the_dra_gates() {
    let mut expected = changes(&dra_gates_true());
    expected.insert(PRESENT.to_owned(), Some("true".to_owned()));
    assert_eq!(
        decide_served(&n1_h100_fresh(), None, true),
        Decision {
            changes: expected,
            layout_wait: None
        },
        "no MIG seed, no ClusterPolicy gate"
    );
    assert_eq!(
        decide_served(&n1_h100_labelled(), None, true).changes,
        changes(&[
            (PLUGIN, None),
            (MIG_MANAGER, None),
            (DCGM, None),
            (DCGM_EXPORTER, None),
            (DRA_DRIVER, Some("true")),
            (DRA_VALIDATOR, Some("true")),
            (DCGM_DRA, Some("true")),
            (DCGM_EXPORTER_DRA, Some("true"))
        ]),
        "a former ClusterPolicy's device plugin and MIG manager gates go, the others stay"
    );
    let converged = converge_served(&n1_h100_labelled(), None, true);
    assert!(converged.contains_key("nvidia.com/gpu.deploy.driver"));
    assert_eq!(
        decide_served(&n4_cpu(), None, true).changes,
        LabelChanges::new(),
        "not a GPU node"
    );
    let labelled = with(&n1_h100_labelled(), &[(RESOURCE_API, "device-plugin")], &[]);
    assert_eq!(
        decide_served(&labelled, None, true).changes,
        decide_served(&n1_h100_labelled(), None, true).changes,
        "the label is read only beside a ClusterPolicy"
    );
}

#[test]
fn the_dra_gates_follow_gpu_presence_and_the_operands_switch() {
    let dra = converge_served(&n1_h100_fresh(), None, true);
    let gone = with(&dra, &[], &["feature.node.kubernetes.io/pci-10de.present"]);
    assert_eq!(
        decide_served(&gone, None, true).changes,
        changes(&[
            (PRESENT, Some("false")),
            (DRA_DRIVER, None),
            (DRA_VALIDATOR, None),
            (DCGM_DRA, None),
            (DCGM_EXPORTER_DRA, None)
        ])
    );
    let off = with(&dra, &[("nvidia.com/gpu.deploy.operands", "false")], &[]);
    assert_eq!(
        decide_served(&off, None, true).changes,
        changes(&[
            (DRA_DRIVER, None),
            (DRA_VALIDATOR, None),
            (DCGM_DRA, None),
            (DCGM_EXPORTER_DRA, None)
        ])
    );
    let both = converge_served(&n1_h100_fresh(), Some(&default_policy()), true);
    let off = with(&both, &[("nvidia.com/gpu.deploy.operands", "false")], &[]);
    assert!(
        deploy_keys(&applied(
            &off,
            &decide_served(&off, Some(&default_policy()), true).changes
        ))
        .iter()
        .all(|k| *k == "nvidia.com/gpu.deploy.operands")
    );
}

#[test]
fn beside_a_cluster_policy_a_node_is_dra_only_when_labelled_so() {
    let policy = default_policy();
    for node in [
        n1_h100_fresh(),
        n1_h100_labelled(),
        n2_a100_fresh(),
        n3_t4(),
    ] {
        assert_eq!(
            decide_served(&node, Some(&policy), true),
            decide(&node, &policy),
            "unlabelled: the device plugin"
        );
        let plugin = with(&node, &[(RESOURCE_API, "device-plugin")], &[]);
        assert_eq!(
            decide_served(&plugin, Some(&policy), true),
            decide(&plugin, &policy)
        );
        let bogus = with(&node, &[(RESOURCE_API, "DRA")], &[]);
        assert_eq!(
            decide_served(&bogus, Some(&policy), true),
            decide(&bogus, &policy),
            "an unknown value reads as device-plugin"
        );
    }
    let fresh = with(&n1_h100_fresh(), &[(RESOURCE_API, "dra")], &[]);
    let mut expected = container_true();
    for off in [PLUGIN, DCGM, DCGM_EXPORTER] {
        expected.remove(off);
    }
    expected.extend(changes(&dra_gates_true()));
    expected.insert(PRESENT.to_owned(), Some("true".to_owned()));
    assert_eq!(
        decide_served(&fresh, Some(&policy), true),
        Decision {
            changes: expected,
            layout_wait: None
        },
        "the container stack without the device plugin, the MIG manager and its seed"
    );
    let converged = converge_served(&fresh, Some(&policy), true);
    assert!(!converged.contains_key(PLUGIN) && !converged.contains_key(MIG_MANAGER));
}

#[test]
fn a_dra_node_runs_the_container_stack_whatever_its_workload_config() {
    let policy = sandbox_policy(Some(WorkloadConfig::VmPassthrough), None);
    let node = with(
        &n1_h100_labelled(),
        &[
            (RESOURCE_API, "dra"),
            ("nvidia.com/gpu.workload.config", "vm-passthrough"),
            ("nvidia.com/gpu.deploy.vfio-manager", "true"),
            ("nvidia.com/gpu.deploy.sandbox-validator", "true"),
        ],
        &[],
    );
    let after = converge_served(&node, Some(&policy), true);
    let mut expected: Vec<&str> = CONTAINER_DEPLOY_TRUE
        .iter()
        .map(|(k, _)| *k)
        .filter(|k| ![PLUGIN, DCGM, DCGM_EXPORTER].contains(k))
        .chain([
            CLIENT,
            DRA_DRIVER,
            DRA_VALIDATOR,
            DCGM_DRA,
            DCGM_EXPORTER_DRA,
        ])
        .collect();
    expected.sort_unstable();
    assert_eq!(deploy_keys(&after), expected);
}

#[test]
fn a_dra_node_neither_waits_for_a_mig_layout_nor_loses_a_paused_gate() {
    let policy = default_policy();
    let asks = with(
        &n1_h100_labelled(),
        &[
            (RESOURCE_API, "dra"),
            (MIG_CONFIG, "all-1g.10gb"),
            ("nvidia.com/mig.config.state", "pending"),
        ],
        &[CLIENT],
    );
    assert!(
        decide(&asks, &policy).layout_wait.is_some(),
        "as a plugin node"
    );
    assert_eq!(decide_served(&asks, Some(&policy), true).layout_wait, None);
    let paused = with(
        &converge_served(
            &with(&n1_h100_fresh(), &[(RESOURCE_API, "dra")], &[]),
            Some(&policy),
            true,
        ),
        &[(DRA_DRIVER, "paused-for-driver-upgrade")],
        &[],
    );
    assert_eq!(
        decide_served(&paused, Some(&policy), true).changes,
        LabelChanges::new()
    );
}

#[test]
fn relabelling_one_node_moves_exactly_that_nodes_gates_and_back() {
    let policy = default_policy();
    let fleet: Vec<BTreeMap<String, String>> = [n1_h100_fresh(), n2_a100_fresh(), n3_t4()]
        .iter()
        .map(|n| converge_served(n, Some(&policy), true))
        .collect();
    let mut relabelled = fleet.clone();
    relabelled[1].insert(RESOURCE_API.to_owned(), "dra".to_owned());
    let moved: Vec<LabelChanges> = relabelled
        .iter()
        .map(|n| decide_served(n, Some(&policy), true).changes)
        .collect();
    assert_eq!(moved[0], LabelChanges::new());
    assert_eq!(moved[2], LabelChanges::new());
    assert_eq!(
        moved[1],
        changes(&[
            (PLUGIN, None),
            (MIG_MANAGER, None),
            (DCGM, None),
            (DCGM_EXPORTER, None),
            (DRA_DRIVER, Some("true")),
            (DRA_VALIDATOR, Some("true")),
            (DCGM_DRA, Some("true")),
            (DCGM_EXPORTER_DRA, Some("true"))
        ])
    );
    let dra = converge_served(&relabelled[1], Some(&policy), true);
    let back = with(&dra, &[(RESOURCE_API, "device-plugin")], &[]);
    assert_eq!(
        decide_served(&back, Some(&policy), true).changes,
        changes(&[
            (PLUGIN, Some("true")),
            (MIG_MANAGER, Some("true")),
            (DCGM, Some("true")),
            (DCGM_EXPORTER, Some("true")),
            (DRA_DRIVER, None),
            (DRA_VALIDATOR, None),
            (DCGM_DRA, None),
            (DCGM_EXPORTER_DRA, None)
        ])
    );
    assert_eq!(
        decide(&dra, &policy).changes,
        decide_served(&back, Some(&policy), true).changes,
        "the GPUCluster going away moves the node back the same way"
    );
}
