//! Which holders block which switch, and what the node's gates do meanwhile.

use gpu_operator_api::labels::{DEPLOY_DRA_DRIVER, GPU_RESOURCE_API};
use k8s_openapi::api::resource::v1::{
    AllocationResult, DeviceAllocationResult, DeviceRequestAllocationResult,
    ResourceClaimConsumerReference, ResourceClaimStatus,
};
use serde_json::json;

use super::*;
use crate::{
    decide_as, decide_served,
    desired::fixtures::{default_policy, n1_h100_labelled, with},
};

const NS: &str = "gpu-operator";
const PLUGIN: &str = "nvidia.com/gpu.deploy.device-plugin";
const BOTH: Served = Served {
    policy: true,
    gpu_cluster: true,
};

/// `node` as the labeller leaves it with both owners.
fn converged(node: BTreeMap<String, String>) -> BTreeMap<String, String> {
    let changes = decide_served(&node, Some(&default_policy()), true).changes;
    let mut node = node;
    for (key, value) in changes {
        match value {
            Some(value) => node.insert(key, value),
            None => node.remove(&key),
        };
    }
    node
}

/// N1 converged as a `dra` node (label and gates).
fn dra_node() -> BTreeMap<String, String> {
    converged(with(&n1_h100_labelled(), &[(GPU_RESOURCE_API, "dra")], &[]))
}

/// N1 converged as a device-plugin node.
fn plugin_node() -> BTreeMap<String, String> {
    converged(n1_h100_labelled())
}

fn relabelled(node: &BTreeMap<String, String>, api: &str) -> BTreeMap<String, String> {
    with(node, &[(GPU_RESOURCE_API, api)], &[])
}

const TO_PLUGIN: Switch = Switch {
    from: ResourceApi::Dra,
    to: ResourceApi::DevicePlugin,
};
const TO_DRA: Switch = Switch {
    from: ResourceApi::DevicePlugin,
    to: ResourceApi::Dra,
};

#[test]
fn the_gates_say_the_current_api() {
    assert_eq!(current(&dra_node()), Some(ResourceApi::Dra));
    assert_eq!(current(&plugin_node()), Some(ResourceApi::DevicePlugin));
    let paused = with(&plugin_node(), &[(PLUGIN, "paused-for-mig-change")], &[]);
    assert_eq!(current(&paused), Some(ResourceApi::DevicePlugin));
    let only_dcgm = with(
        &BTreeMap::new(),
        &[("nvidia.com/gpu.deploy.dcgm", "true")],
        &[],
    );
    assert_eq!(current(&only_dcgm), Some(ResourceApi::DevicePlugin));
    let off = with(&dra_node(), &[(DEPLOY_DRA_DRIVER, "false")], &[]);
    assert_eq!(current(&off), None, "neither stack offers its GPUs");
    assert_eq!(current(&BTreeMap::new()), None, "a fresh node");
}

#[test]
fn a_switch_is_pending_only_with_both_owners_when_the_label_wants_the_other_api() {
    assert_eq!(
        pending(&relabelled(&dra_node(), "device-plugin"), BOTH),
        Some(TO_PLUGIN)
    );
    assert_eq!(
        pending(&dra_node(), BOTH),
        None,
        "no switch pending: no reads"
    );
    assert_eq!(pending(&plugin_node(), BOTH), None);
    assert_eq!(
        pending(&relabelled(&plugin_node(), "dra"), BOTH),
        Some(TO_DRA)
    );
    let without_label = with(&dra_node(), &[], &[GPU_RESOURCE_API]);
    assert_eq!(pending(&without_label, BOTH), Some(TO_PLUGIN));
    let one_owner = [
        Served {
            policy: true,
            gpu_cluster: false,
        },
        Served {
            policy: false,
            gpu_cluster: true,
        },
    ];
    for served in one_owner {
        assert_eq!(
            pending(&relabelled(&dra_node(), "device-plugin"), served),
            None
        );
        assert_eq!(pending(&relabelled(&plugin_node(), "dra"), served), None);
    }
    let fresh = with(&n1_h100_labelled(), &[(GPU_RESOURCE_API, "dra")], &[PLUGIN]);
    let fresh: BTreeMap<String, String> = fresh
        .into_iter()
        .filter(|(k, _)| !k.starts_with("nvidia.com/gpu.deploy."))
        .collect();
    assert_eq!(pending(&fresh, BOTH), None, "no stack yet: nothing to wait");
    let no_gpu = with(
        &relabelled(&dra_node(), "device-plugin"),
        &[("nvidia.com/gpu.present", "false")],
        &[],
    );
    assert_eq!(pending(&no_gpu, BOTH), None);
    let no_operands = with(
        &relabelled(&dra_node(), "device-plugin"),
        &[("nvidia.com/gpu.deploy.operands", "false")],
        &[],
    );
    assert_eq!(pending(&no_operands, BOTH), None);
}

fn pod(name: &str, phase: &str, containers: &serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ml"},
        "spec": containers,
        "status": {"phase": phase},
    }))
    .unwrap()
}

fn limits(resource: &str) -> serde_json::Value {
    json!({"containers": [{"name": "c", "resources": {"limits": {resource: "1"}}}]})
}

#[test]
fn running_pods_with_nvidia_resources_hold_the_switch_to_dra() {
    let init = json!({
        "initContainers": [{"name": "i", "resources": {"requests": {"nvidia.com/gpu": "1"}}}],
        "containers": [{"name": "c"}],
    });
    let pods = [
        pod("train", "Running", &limits("nvidia.com/gpu")),
        pod("done", "Succeeded", &limits("nvidia.com/gpu")),
        pod("failed", "Failed", &limits("nvidia.com/gpu")),
        pod("mig", "Running", &limits("nvidia.com/mig-1g.10gb")),
        pod("shared", "Pending", &limits("nvidia.com/gpu.shared")),
        pod("init", "Pending", &init),
        pod("web", "Running", &limits("cpu")),
    ];
    assert_eq!(
        step_to_dra(&pods),
        Step::Wait(vec![
            "ml/init".to_owned(),
            "ml/mig".to_owned(),
            "ml/shared".to_owned(),
            "ml/train".to_owned()
        ])
    );
    assert_eq!(step_to_dra(&pods[1..3]), Step::Switch, "finished pods");
    assert_eq!(step_to_dra(&pods[6..]), Step::Switch, "no GPU");
    assert_eq!(step_to_dra(&[]), Step::Switch);
}

fn claim(namespace: &str, name: &str, driver: &str, pool: &str, pods: &[&str]) -> ResourceClaim {
    ResourceClaim {
        metadata: kube::api::ObjectMeta {
            namespace: Some(namespace.to_owned()),
            name: Some(name.to_owned()),
            ..Default::default()
        },
        spec: k8s_openapi::api::resource::v1::ResourceClaimSpec::default(),
        status: Some(ResourceClaimStatus {
            allocation: Some(AllocationResult {
                devices: Some(DeviceAllocationResult {
                    results: Some(vec![DeviceRequestAllocationResult {
                        driver: driver.to_owned(),
                        pool: pool.to_owned(),
                        device: "gpu-0".to_owned(),
                        request: "gpu".to_owned(),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            reserved_for: Some(
                pods.iter()
                    .map(|pod| ResourceClaimConsumerReference {
                        resource: "pods".to_owned(),
                        name: (*pod).to_owned(),
                        uid: "uid".to_owned(),
                        api_group: None,
                    })
                    .collect(),
            ),
            ..Default::default()
        }),
    }
}

#[test]
fn claims_of_our_drivers_on_the_node_hold_the_switch_away_from_dra() {
    let claims = [
        claim("ml", "whole-gpu", "gpu.nvidia.com", "n1", &["train"]),
        claim("imex", "domain", "compute-domain.nvidia.com", "n1", &[]),
        claim("ml", "elsewhere", "gpu.nvidia.com", "n2", &["other"]),
        claim("net", "nic", "sriov.example.com", "n1", &["web"]),
    ];
    assert_eq!(
        step_from_dra(&claims, NS, "n1"),
        Step::Wait(vec![
            "imex/domain".to_owned(),
            "ml/whole-gpu (pod train)".to_owned()
        ])
    );
    assert_eq!(
        step_from_dra(&claims[2..], NS, "n1"),
        Step::Switch,
        "other nodes' and other drivers' claims"
    );
    let validator = claim(
        NS,
        "nvidia-dra-validator-x1-gpu",
        "gpu.nvidia.com",
        "n1",
        &["nvidia-dra-validator-x1"],
    );
    assert_eq!(
        step_from_dra(std::slice::from_ref(&validator), NS, "n1"),
        Step::ReleaseOwnClaims
    );
    assert_eq!(
        step_from_dra(&[validator, claims[0].clone()], NS, "n1"),
        Step::Wait(vec!["ml/whole-gpu (pod train)".to_owned()]),
        "a workload's claim holds everything"
    );
}

#[test]
fn a_waiting_node_keeps_its_gates_and_a_released_one_loses_only_the_claiming_gates() {
    let policy = default_policy();
    let node = relabelled(&dra_node(), "device-plugin");
    let wait = Step::Wait(vec!["ml/a".to_owned()]);
    let held = decide_as(&node, Some(&policy), gates_api(TO_PLUGIN, &wait));
    assert!(held.changes.is_empty(), "{:?}", held.changes);
    let switched = decide_as(&node, Some(&policy), gates_api(TO_PLUGIN, &Step::Switch));
    assert_eq!(switched.changes.get(DEPLOY_DRA_DRIVER), Some(&None));
    assert_eq!(switched.changes.get(PLUGIN), Some(&Some("true".to_owned())));

    let mut release = decide_as(
        &node,
        Some(&policy),
        gates_api(TO_PLUGIN, &Step::ReleaseOwnClaims),
    );
    release_own_claims(&node, &mut release.changes);
    let removed: Vec<&str> = release.changes.keys().map(String::as_str).collect();
    let mut claiming = CLAIMING_GATES.to_vec();
    claiming.sort_unstable();
    assert_eq!(removed, claiming);
    assert!(release.changes.values().all(Option::is_none));
    let mut after = node.clone();
    for key in CLAIMING_GATES {
        after.remove(key);
    }
    let mut again = decide_as(&after, Some(&policy), ResourceApi::Dra);
    release_own_claims(&after, &mut again.changes);
    assert!(
        again.changes.is_empty(),
        "not put back: {:?}",
        again.changes
    );

    let plugin = relabelled(&plugin_node(), "dra");
    let held = decide_as(&plugin, Some(&policy), gates_api(TO_DRA, &wait));
    assert!(held.changes.is_empty(), "{:?}", held.changes);
}

#[test]
fn the_message_names_five_holders_counts_the_rest_and_says_the_fix() {
    let holders: Vec<String> = (0..7).map(|i| format!("ml/p{i}")).collect();
    let message = waiting_message("n1", TO_DRA, &holders);
    assert_eq!(
        message,
        "node n1 waits to move from the ClusterPolicy's device plugin to the GPUCluster's DRA \
         driver (nvidia.com/gpu.resource-api): 7 running pod(s) requesting its GPUs still hold \
         its GPUs: ml/p0, ml/p1, ml/p2, ml/p3, ml/p4 and 2 more; its gates stay until they are \
         gone (checked every 15s). Delete those workloads or let them finish; drain the node \
         (kubectl drain n1 --ignore-daemonsets) to hurry"
    );
    let one = waiting_message("n1", TO_PLUGIN, &["ml/c (pod p)".to_owned()]);
    assert!(
        one.contains(
            "1 ResourceClaim(s) allocated its DRA devices still hold its GPUs: ml/c (pod p);"
        ),
        "{one}"
    );
    assert_eq!(
        switched_message("n1", TO_PLUGIN),
        "node n1: no workload holds its GPUs any more; they move from the GPUCluster's DRA \
         driver to the ClusterPolicy's device plugin"
    );
}
