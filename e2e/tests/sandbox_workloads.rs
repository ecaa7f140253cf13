//! Sandbox workloads on the kwok fleet: with `sandboxWorkloads.enabled`, the VM nodes (one
//! `vm-passthrough`, one `vm-vgpu`) get the sandbox stack — the sandbox validator on both, the
//! VFIO manager on the passthrough node, the KubeVirt device plugin on both — and none of the
//! container stack, while the other GPU nodes keep the container stack and none of the sandbox
//! one. Relabelling a node vm-passthrough → vm-vgpu → container costs the operator one patch of
//! that node each and no write of a DaemonSet (the pods follow the gate labels); a node labelled
//! with an unknown workload config runs the default (container) stack and gets one Warning Event
//! saying so, not one per reconcile; switching sandbox workloads off prunes every sandbox object.
#![cfg(feature = "e2e")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::large_futures
)]

use std::collections::BTreeSet;

use gpu_operator_e2e::{
    quiet::{change_unrelated_labels, operator_writes},
    scenario as support,
};

use gpu_operator_api::{ClusterPolicy, ClusterPolicySpec};
use gpu_operator_harness::{
    access::kubectl_ok, crd::repo_root, mutate::nvidia_sample_specs, operator::Operator,
    unique_name, wait_until,
};
use k8s_openapi::{
    api::{core::v1::Event, rbac::v1::ClusterRole},
    jiff::Timestamp,
};
use kube::{
    Api,
    api::{ListParams, Patch, PatchParams, PostParams},
};
use serde_json::json;

use support::{
    Cleanup, Env, IMAGES, PLUGIN, TIMEOUT, condition, gpu_nodes, is_ready, pods_of, setup,
    simulated_nodes, wait_policy,
};

const WORKLOAD: &str = "nvidia.com/gpu.workload.config";
const VALIDATOR: &str = "nvidia-sandbox-validator";
const VFIO: &str = "nvidia-vfio-manager";
const KUBEVIRT_PLUGIN: &str = "nvidia-sandbox-device-plugin-daemonset";
const VGPU_MANAGER: &str = "nvidia-vgpu-manager-daemonset";
const VGPU_DEVICE_MANAGER: &str = "nvidia-vgpu-device-manager";
const SANDBOX: [&str; 5] = [
    VALIDATOR,
    VFIO,
    KUBEVIRT_PLUGIN,
    VGPU_MANAGER,
    VGPU_DEVICE_MANAGER,
];

/// Removes the workload labels this scenario put on nodes, also when a step panics.
struct NodeLabels(Vec<String>);

impl Drop for NodeLabels {
    fn drop(&mut self) {
        for node in &self.0 {
            let _ = kubectl_ok(&["label", "node", node, &format!("{WORKLOAD}-")]);
        }
    }
}

fn label(node: &str, workload: &str) {
    kubectl_ok(&[
        "label",
        "node",
        node,
        &format!("{WORKLOAD}={workload}"),
        "--overwrite",
    ])
    .unwrap();
}

/// Sandbox workloads on, with the VFIO manager and the KubeVirt plugin (images in the spec: the
/// scenario's operator has only the container stack's image variables).
fn sandbox_spec() -> ClusterPolicySpec {
    ClusterPolicySpec {
        sandbox_workloads: Some(serde_json::from_value(json!({"enabled": true})).unwrap()),
        vfio_manager: Some(
            serde_json::from_value(json!({
                "enabled": true,
                "repository": "nvcr.io/nvidia", "image": "cuda", "version": "12.9.1-base-ubi9",
                "driverManager": {
                    "repository": "nvcr.io/nvidia/cloud-native",
                    "image": "k8s-driver-manager", "version": "v0.9.1"
                }
            }))
            .unwrap(),
        ),
        sandbox_device_plugin: Some(
            serde_json::from_value(json!({
                "enabled": true,
                "repository": "nvcr.io/nvidia", "image": "kubevirt-gpu-device-plugin",
                "version": "v1.4.0"
            }))
            .unwrap(),
        ),
        ..ClusterPolicySpec::default()
    }
}

/// The nodes DaemonSet `name` has pods on.
async fn nodes_of(env: &Env, name: &str) -> BTreeSet<String> {
    pods_of(env, name).await.into_keys().collect()
}

/// Waits until DaemonSet `name` has pods on exactly `nodes` (and, when it has any, is ready).
async fn wait_pods_on(env: &Env, name: &str, nodes: &BTreeSet<String>) {
    let result = wait_until(&format!("{name} on {nodes:?}"), TIMEOUT, || async {
        let ready = match env.daemonsets().get_opt(name).await? {
            Some(ds) => {
                let status = ds.status.unwrap_or_default();
                status.number_ready == status.desired_number_scheduled
                    && usize::try_from(status.desired_number_scheduled).ok() == Some(nodes.len())
            }
            None => nodes.is_empty(),
        };
        Ok((ready && nodes_of(env, name).await == *nodes).then_some(()))
    })
    .await;
    if let Err(error) = result {
        panic!("{error}; pods on {:?}", nodes_of(env, name).await);
    }
}

/// Waits until DaemonSet `name` is ready with pods on some of `nodes` and nowhere else.
async fn wait_pods_within(env: &Env, name: &str, nodes: &BTreeSet<String>) {
    let result = wait_until(&format!("{name} within {nodes:?}"), TIMEOUT, || async {
        let Some(ds) = env.daemonsets().get_opt(name).await? else {
            return Ok(None);
        };
        let status = ds.status.unwrap_or_default();
        let on = nodes_of(env, name).await;
        Ok((status.number_ready == status.desired_number_scheduled
            && !on.is_empty()
            && on.is_subset(nodes))
        .then_some(()))
    })
    .await;
    if let Err(error) = result {
        panic!("{error}; pods on {:?}", nodes_of(env, name).await);
    }
}

/// Relabels `node` to `workload`, waits for the DaemonSets to follow (`expected`: DaemonSet and
/// the nodes it should cover), and checks the operator wrote exactly one patch of that node
/// and nothing but status besides.
async fn relabel(env: &Env, node: &str, workload: &str, expected: &[(&str, &BTreeSet<String>)]) {
    let from = Timestamp::now();
    label(node, workload);
    for (name, nodes) in expected {
        wait_pods_on(env, name, nodes).await;
    }
    let writes = operator_writes(env, from);
    let nodes: Vec<_> = writes.iter().filter(|w| w.resource == "nodes").collect();
    assert!(
        nodes.len() == 1 && nodes[0].name == node && nodes[0].verb == "patch",
        "{workload}: one patch of {node}: {writes:#?}"
    );
    let others: Vec<_> = writes
        .iter()
        .filter(|w| w.resource != "nodes" && w.resource != "clusterpolicies/status")
        .collect();
    assert!(others.is_empty(), "{workload}: no other write: {others:#?}");
}

/// The sandbox operands' images (NVIDIA's operator reads them from its environment; its sample
/// ClusterPolicy names none).
const SANDBOX_IMAGES: [(&str, &str); 6] = [
    ("VFIO_MANAGER_IMAGE", "nvcr.io/nvidia/cuda:12.9.1-base-ubi9"),
    (
        "SANDBOX_DEVICE_PLUGIN_IMAGE",
        "nvcr.io/nvidia/kubevirt-gpu-device-plugin:v1.4.0",
    ),
    (
        "KATA_SANDBOX_DEVICE_PLUGIN_IMAGE",
        "nvcr.io/nvidia/cloud-native/nvidia-sandbox-device-plugin:v0.0.1",
    ),
    (
        "VGPU_MANAGER_IMAGE",
        "nvcr.io/nvidia/vgpu-manager:595.91.07",
    ),
    (
        "VGPU_DEVICE_MANAGER_IMAGE",
        "nvcr.io/nvidia/cloud-native/vgpu-device-manager:v0.4.1",
    ),
    (
        "CC_MANAGER_IMAGE",
        "nvcr.io/nvidia/cloud-native/k8s-cc-manager:v0.3.0",
    ),
];

/// NVIDIA's v26.7.0 sample ClusterPolicy with `sandboxWorkloads.enabled` switched on, in each
/// mode and with each default workload: every condition at the policy's generation and the
/// policy `ready`, the vGPU manager and device manager on exactly the `vm-vgpu` nodes; in `kata`
/// mode, which the sample gives no Kata device plugin, the VM nodes' missing device plugin is said
/// in `SandboxWorkloadsReady`. Then a quiet window: no write. `passthrough` is labelled
/// `vm-passthrough`, `vgpu` `vm-vgpu`, the other GPU nodes run the default.
async fn nvidias_sample_converges_in_each_mode(
    env: &Env,
    operator: &Operator,
    name: &str,
    gpus: &[String],
    (passthrough, vgpu): (&str, &str),
) {
    let sample = nvidia_sample_specs(&repo_root()).unwrap().pop().unwrap();
    let mut policy = env.policies().get(name).await.unwrap();
    policy.spec = serde_json::from_value(sample).unwrap();
    env.policies()
        .replace(name, &PostParams::default(), &policy)
        .await
        .unwrap();
    for mode in ["kubevirt", "kata"] {
        for default in ["container", "vm-passthrough", "vm-vgpu"] {
            let sandbox = json!({"enabled": true, "mode": mode, "defaultWorkload": default});
            env.policies()
                .patch(
                    name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"sandboxWorkloads": sandbox}})),
                )
                .await
                .unwrap();
            let policy = wait_policy(env, name, &format!("{mode}/{default} converged"), |p| {
                is_ready(p)
                    && p.status.as_ref().is_some_and(|s| {
                        s.conditions
                            .iter()
                            .flatten()
                            .all(|c| c.observed_generation == p.metadata.generation)
                    })
            })
            .await;
            let vgpu_nodes: BTreeSet<String> = gpus
                .iter()
                .filter(|n| *n == vgpu || (default == "vm-vgpu" && *n != passthrough))
                .cloned()
                .collect();
            // The vGPU host driver is built for one OS (NVIDIA's single DaemonSet): the vm-vgpu
            // nodes of that OS.
            wait_pods_within(env, VGPU_MANAGER, &vgpu_nodes).await;
            wait_pods_on(env, VGPU_DEVICE_MANAGER, &vgpu_nodes).await;
            let sandbox = condition(&policy, "SandboxWorkloadsReady").unwrap();
            if mode == "kata" {
                assert!(
                    sandbox.status == "False"
                        && sandbox.message.contains("kataSandboxDevicePlugin.enabled"),
                    "{mode}/{default}: {sandbox:#?}"
                );
            } else {
                assert_eq!(sandbox.status, "True", "{mode}/{default}: {sandbox:#?}");
            }
        }
    }
    let from = Timestamp::now();
    change_unrelated_labels(env, operator, gpus, std::time::Duration::from_secs(5)).await;
    let writes = operator_writes(env, from);
    assert!(writes.is_empty(), "converged, yet: {writes:#?}");
}

/// A workload config value NVIDIA's operator does not know, this run's own (an earlier run's
/// Events on the same node name another).
fn unknown_value() -> String {
    format!("vm-gpu-{}", std::process::id())
}

/// Waits for the `InvalidWorkloadConfig` Event on `node` and returns how many there are.
async fn invalid_workload_events(env: &Env, node: &str) -> usize {
    let events: Api<Event> = Api::all(env.client.clone());
    let selector = format!("involvedObject.name={node},reason=InvalidWorkloadConfig");
    wait_until(
        "the Event on the node with the unknown workload config",
        TIMEOUT,
        || async {
            let list = events
                .list(&ListParams::default().fields(&selector))
                .await?;
            let said: usize = list
                .items
                .iter()
                .filter(|e| {
                    e.message
                        .as_deref()
                        .is_some_and(|m| m.contains(&format!("{:?}", unknown_value())))
                })
                .map(|e| usize::try_from(e.count.unwrap_or(1)).unwrap_or(1))
                .sum();
            Ok((said > 0).then_some(said))
        },
    )
    .await
    .unwrap()
}

/// One Event for the unknown workload config value on `node`, also after a reconcile of the node
/// that finds the same value.
async fn unknown_label_said_once(env: &Env, node: &str) {
    assert_eq!(invalid_workload_events(env, node).await, 1);
    kubectl_ok(&["label", "node", node, "e2e-poke=1", "--overwrite"]).unwrap();
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    kubectl_ok(&["label", "node", node, "e2e-poke-"]).unwrap();
    assert_eq!(invalid_workload_events(env, node).await, 1, "said once");
}

/// `passthrough` (labelled `vm-passthrough`) → vm-vgpu → container → vm-passthrough: one node
/// patch each, the pods follow. `vgpu` stays `vm-vgpu`; `containers` run the container stack.
async fn relabel_walk(env: &Env, (passthrough, vgpu): (&str, &str), containers: &BTreeSet<String>) {
    let vm: BTreeSet<String> = [passthrough.to_owned(), vgpu.to_owned()].into();
    let none = BTreeSet::new();
    relabel(
        env,
        passthrough,
        "vm-vgpu",
        &[(VFIO, &none), (VALIDATOR, &vm), (KUBEVIRT_PLUGIN, &vm)],
    )
    .await;
    let only_vgpu: BTreeSet<String> = [vgpu.to_owned()].into();
    let mut more_containers = containers.clone();
    more_containers.insert(passthrough.to_owned());
    relabel(
        env,
        passthrough,
        "container",
        &[
            (VALIDATOR, &only_vgpu),
            (KUBEVIRT_PLUGIN, &only_vgpu),
            (PLUGIN, &more_containers),
        ],
    )
    .await;
    let only_passthrough: BTreeSet<String> = [passthrough.to_owned()].into();
    relabel(
        env,
        passthrough,
        "vm-passthrough",
        &[
            (VALIDATOR, &vm),
            (VFIO, &only_passthrough),
            (PLUGIN, containers),
        ],
    )
    .await;
}

/// Sandbox workloads off: every sandbox DaemonSet and ClusterRole pruned.
async fn sandbox_off_prunes_everything(env: &Env, name: &str) {
    env.policies()
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"sandboxWorkloads": {"enabled": false}}})),
        )
        .await
        .unwrap();
    let roles: Api<ClusterRole> = Api::all(env.client.clone());
    wait_until("every sandbox object pruned", TIMEOUT, || async {
        for name in SANDBOX {
            if env.daemonsets().get_opt(name).await?.is_some() {
                return Ok(None);
            }
        }
        for name in [
            VALIDATOR,
            VFIO,
            "nvidia-sandbox-device-plugin",
            "nvidia-vgpu-manager",
            VGPU_DEVICE_MANAGER,
        ] {
            if roles.get_opt(name).await?.is_some() {
                return Ok(None);
            }
        }
        Ok(Some(()))
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn vm_nodes_get_the_sandbox_stack_and_move_between_stacks_with_one_node_patch() {
    let env = setup().await;
    let mut gpus = gpu_nodes(&simulated_nodes(&env.client).await);
    gpus.sort();
    let (passthrough, vgpu, bogus) = (gpus[0].clone(), gpus[1].clone(), gpus[2].clone());
    let _labels = NodeLabels(vec![passthrough.clone(), vgpu.clone(), bogus.clone()]);
    label(&passthrough, "vm-passthrough");
    label(&vgpu, "vm-vgpu");
    label(&bogus, &unknown_value());
    let images: Vec<(&str, &str)> = IMAGES.iter().chain(&SANDBOX_IMAGES).copied().collect();
    let operator = env.start(&images);
    let name = unique_name("sandbox");
    let _cleanup = Cleanup {
        namespace: env.namespace.clone(),
        policies: vec![name.clone()],
    };
    env.policies()
        .create(
            &PostParams::default(),
            &ClusterPolicy::new(&name, sandbox_spec()),
        )
        .await
        .unwrap();

    // The right stack on the right nodes, and nowhere else.
    let vm: BTreeSet<String> = [passthrough.clone(), vgpu.clone()].into();
    let containers: BTreeSet<String> = gpus.iter().filter(|n| !vm.contains(*n)).cloned().collect();
    let only_passthrough: BTreeSet<String> = [passthrough.clone()].into();
    wait_pods_on(&env, VALIDATOR, &vm).await;
    wait_pods_on(&env, VFIO, &only_passthrough).await;
    wait_pods_on(&env, KUBEVIRT_PLUGIN, &vm).await;
    wait_pods_on(&env, PLUGIN, &containers).await;
    for daemonset in ["nvidia-operator-validator", "gpu-feature-discovery"] {
        let on_vm: Vec<_> = nodes_of(&env, daemonset)
            .await
            .into_iter()
            .filter(|n| vm.contains(n))
            .collect();
        assert!(on_vm.is_empty(), "{daemonset} runs on VM nodes {on_vm:?}");
    }
    wait_policy(&env, &name, "the sandbox operands ready", |p| {
        [
            "SandboxValidatorReady",
            "VfioManagerReady",
            "SandboxDevicePluginReady",
        ]
        .iter()
        .all(|c| condition(p, c).is_some_and(|c| c.status == "True" && c.reason != "Disabled"))
    })
    .await;

    // The unknown value: the default stack (the node is among `containers`).
    assert!(containers.contains(&bogus));
    unknown_label_said_once(&env, &bogus).await;
    relabel_walk(&env, (&passthrough, &vgpu), &containers).await;
    nvidias_sample_converges_in_each_mode(&env, &operator, &name, &gpus, (&passthrough, &vgpu))
        .await;

    sandbox_off_prunes_everything(&env, &name).await;
    operator.stop().unwrap();
}
