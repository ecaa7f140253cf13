//! Where each stack runs, the device-plugin gaps with their fixes, and the Kata manager warning.

use gpu_operator_api::spec::{
    CcManagerSpec, KataManagerSpec, KataSandboxDevicePluginSpec, SandboxDevicePluginSpec,
    SandboxWorkloadsSpec, VfioManagerSpec, VgpuDeviceManagerSpec, VgpuManagerSpec,
};
use gpu_operator_core::{
    cache::{facts::ClusterFacts, node_meta::NodeMeta},
    contract, fixtures,
};

use super::*;

fn input(spec: &ClusterPolicySpec, nodes: &[NodeMeta]) -> Option<Input> {
    let facts = ClusterFacts::from_nodes(nodes, []);
    let cluster = contract::Cluster {
        namespace: "gpu-operator",
        facts: &facts,
        image_env: &fixtures::image_env,
        config_maps: &fixtures::plugin_configs,
        policy: None,
        server: gpu_operator_core::cache::server_facts::ServerFacts::unknown(),
    };
    Sandbox::validate(spec, &cluster).unwrap()
}

fn condition(spec: &ClusterPolicySpec, nodes: &[NodeMeta]) -> Summary {
    Sandbox::summary(&input(spec, nodes).unwrap()).unwrap()
}

/// A GPU node as the user labelled it.
fn node(name: &str, workload: Option<&str>) -> NodeMeta {
    let mut labels = vec![("nvidia.com/gpu.present", "true")];
    if let Some(workload) = workload {
        labels.push(("nvidia.com/gpu.workload.config", workload));
    }
    NodeMeta::new(name, &labels)
}

/// Sandbox workloads on in `mode`, every sandbox operand of NVIDIA's chart enabled.
fn sandbox(mode: SandboxMode, default: Option<WorkloadConfig>) -> ClusterPolicySpec {
    ClusterPolicySpec {
        sandbox_workloads: Some(SandboxWorkloadsSpec {
            enabled: Some(true),
            default_workload: default,
            mode: Some(mode),
        }),
        vfio_manager: Some(VfioManagerSpec {
            enabled: Some(true),
            ..VfioManagerSpec::default()
        }),
        sandbox_device_plugin: Some(SandboxDevicePluginSpec {
            enabled: Some(true),
            ..SandboxDevicePluginSpec::default()
        }),
        kata_sandbox_device_plugin: Some(KataSandboxDevicePluginSpec {
            enabled: Some(true),
            ..KataSandboxDevicePluginSpec::default()
        }),
        vgpu_manager: Some(VgpuManagerSpec {
            enabled: Some(true),
            ..VgpuManagerSpec::default()
        }),
        vgpu_device_manager: Some(VgpuDeviceManagerSpec {
            enabled: Some(true),
            ..VgpuDeviceManagerSpec::default()
        }),
        cc_manager: Some(CcManagerSpec {
            enabled: Some(true),
            ..CcManagerSpec::default()
        }),
        ..ClusterPolicySpec::default()
    }
}

fn fleet() -> [NodeMeta; 5] {
    [
        node("gpu-c", Some("vm-passthrough")),
        node("gpu-a", Some("vm-passthrough")),
        node("gpu-b", None),
        node("gpu-d", Some("container")),
        node("gpu-e", Some("vm-vgpu")),
    ]
}

#[test]
fn each_stack_is_named_with_its_nodes_and_operands() {
    let d = condition(
        &sandbox(SandboxMode::Kubevirt, Some(WorkloadConfig::VmVgpu)),
        &fleet(),
    );
    assert!(d.ready, "{}", d.message);
    assert_eq!(d.reason, "Placed");
    assert_eq!(
        d.message,
        "sandbox workloads (kubevirt mode): 1 node(s) (gpu-d) container: the container stack; \
         2 node(s) (gpu-a, gpu-c) vm-passthrough: sandbox validator, VFIO manager, KubeVirt \
         device plugin; 2 node(s) (gpu-b, gpu-e) vm-vgpu: sandbox validator, vGPU manager, vGPU \
         device manager, KubeVirt device plugin"
    );
}

#[test]
fn kata_mode_names_the_nodes_left_without_a_device_plugin_and_the_fix() {
    let mut spec = sandbox(SandboxMode::Kata, None);
    let d = condition(&spec, &fleet());
    assert!(!d.ready, "vm-vgpu nodes in kata mode: {}", d.message);
    assert!(
        d.message.starts_with(
            "1 node(s) (gpu-e) vm-vgpu get no device plugin: in kata mode only vm-passthrough"
        ),
        "{}",
        d.message
    );
    assert!(
        d.message.contains(
            "2 node(s) (gpu-a, gpu-c) vm-passthrough: sandbox validator, VFIO manager, Kata \
             device plugin, CC manager"
        ),
        "{}",
        d.message
    );
    spec.kata_sandbox_device_plugin = None;
    let d = condition(&spec, &fleet()[..4]);
    assert_eq!(d.reason, NO_DEVICE_PLUGIN);
    assert!(
        d.message.starts_with(
            "2 node(s) (gpu-a, gpu-c) vm-passthrough get no device plugin: \
             sandboxWorkloads.mode=kata exposes passthrough GPUs through the Kata sandbox device \
             plugin; set kataSandboxDevicePlugin.enabled=true"
        ),
        "{}",
        d.message
    );
}

#[test]
fn no_vm_node_says_how_to_give_one_to_vms() {
    let d = condition(
        &sandbox(SandboxMode::Kubevirt, None),
        &[node("gpu-a", None)],
    );
    assert!(d.ready);
    assert!(
        d.message.ends_with(
            "1 node(s) (gpu-a) container: the container stack; no GPU node runs VMs: label one \
             nvidia.com/gpu.workload.config=vm-passthrough or vm-vgpu, or set \
             sandboxWorkloads.defaultWorkload"
        ),
        "{}",
        d.message
    );
}

#[test]
fn without_sandbox_workloads_it_is_disabled_whatever_the_sections_say() {
    let mut spec = sandbox(SandboxMode::Kata, None);
    spec.sandbox_workloads = None;
    assert_eq!(input(&spec, &fleet()), None);
}

#[test]
fn the_deprecated_kata_manager_is_a_warning() {
    let mut spec = sandbox(SandboxMode::Kata, None);
    assert!(Sandbox::warnings(&input(&spec, &fleet()).unwrap()).is_empty());
    spec.kata_manager = Some(KataManagerSpec {
        enabled: Some(true),
        ..KataManagerSpec::default()
    });
    let warnings = Sandbox::warnings(&input(&spec, &fleet()).unwrap());
    assert_eq!(warnings.len(), 1);
    assert_eq!(warnings[0].reason, KATA_MANAGER_DEPRECATED);
    assert!(
        warnings[0]
            .message
            .starts_with("kataManager.enabled=true is ignored")
    );
}
