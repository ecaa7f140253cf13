//! The settings reported, the nodes named, and silence when nothing unsupported is asked for.

use gpu_operator_api::spec::{
    CcManagerSpec, KataSandboxDevicePluginSpec, PsaSpec, SandboxDevicePluginSpec, SandboxMode,
    SandboxWorkloadsSpec, VfioManagerSpec, VgpuManagerSpec,
};
use gpu_operator_core::{
    cache::{facts::ClusterFacts, node_meta::NodeMeta},
    contract, fixtures,
};

use super::*;

fn check(spec: &ClusterPolicySpec, nodes: &[NodeMeta]) -> Option<String> {
    let facts = ClusterFacts::from_nodes(nodes, []);
    let cluster = contract::Cluster {
        namespace: "gpu-operator",
        facts: &facts,
        image_env: &fixtures::image_env,
        config_maps: &fixtures::plugin_configs,
        policy: None,
    };
    Sandbox::validate(spec, &cluster)
        .unwrap()
        .and_then(|input| Sandbox::not_deployed(&input))
}

/// A GPU node as the user labelled it (the node labeller's deploy labels may not be there yet).
fn node(name: &str, workload: Option<&str>) -> NodeMeta {
    let mut labels = vec![("nvidia.com/gpu.present", "true")];
    if let Some(workload) = workload {
        labels.push(("nvidia.com/gpu.workload.config", workload));
    }
    NodeMeta::new(name, &labels)
}

#[test]
fn sandbox_workloads_name_the_settings_and_the_vm_nodes() {
    let spec = ClusterPolicySpec {
        sandbox_workloads: Some(SandboxWorkloadsSpec {
            enabled: Some(true),
            default_workload: Some(WorkloadConfig::VmVgpu),
            mode: Some(SandboxMode::Kata),
        }),
        cc_manager: Some(CcManagerSpec {
            enabled: Some(true),
            ..CcManagerSpec::default()
        }),
        ..ClusterPolicySpec::default()
    };
    let nodes = [
        node("gpu-c", Some("vm-passthrough")),
        node("gpu-a", Some("vm-passthrough")),
        node("gpu-b", None),
        node("gpu-d", Some("container")),
    ];
    let message = check(&spec, &nodes).unwrap();
    for part in [
        "sandboxWorkloads.enabled=true",
        "sandboxWorkloads.defaultWorkload=vm-vgpu",
        "sandboxWorkloads.mode=kata",
        "2 node(s) (gpu-a, gpu-c) labelled for workload type vm-passthrough get the sandbox validator and the CC manager only",
        "1 node(s) (gpu-b) labelled for workload type vm-vgpu get the sandbox validator and the CC manager only",
        "nvidia.com/gpu.workload.config=container",
    ] {
        assert!(message.contains(part), "{part} not in {message}");
    }
    assert!(!message.contains("gpu-d"), "{message}");
    // The CC manager is deployed (kata mode), so neither reported nor read here.
    assert!(!message.contains("ccManager"), "{message}");
    assert!(Sandbox::IMAGES.iter().all(|i| i.var != "CC_MANAGER_IMAGE"));
}

#[test]
fn psa_and_nothing_unsupported_say_nothing() {
    let mut spec = ClusterPolicySpec::default();
    assert_eq!(check(&spec, &[node("gpu-a", None)]), None);
    // Sandbox sections without sandboxWorkloads.enabled deploy nothing in NVIDIA's operator
    // either.
    spec.cc_manager = Some(CcManagerSpec {
        enabled: Some(true),
        ..CcManagerSpec::default()
    });
    assert_eq!(check(&spec, &[]), None);
    // psa.enabled is done (the namespace is labelled), so it is not reported as unsupported.
    spec.psa = Some(PsaSpec {
        enabled: Some(true),
    });
    // Without sandboxWorkloads.enabled the workload label means nothing.
    assert_eq!(check(&spec, &[node("gpu-a", Some("vm-passthrough"))]), None);
}

#[test]
fn unlabelled_nodes_are_vm_nodes_only_when_the_default_workload_is_one() {
    let mut spec = ClusterPolicySpec {
        sandbox_workloads: Some(SandboxWorkloadsSpec {
            enabled: Some(true),
            ..SandboxWorkloadsSpec::default()
        }),
        ..ClusterPolicySpec::default()
    };
    let nodes = [node("gpu-a", None), node("gpu-b", Some("vm-bogus"))];
    let message = check(&spec, &nodes).unwrap();
    assert!(!message.contains("gpu-a"), "{message}");
    if let Some(sandbox) = spec.sandbox_workloads.as_mut() {
        sandbox.default_workload = Some(WorkloadConfig::VmPassthrough);
    }
    let message = check(&spec, &nodes).unwrap();
    assert!(
        message.contains("2 node(s) (gpu-a, gpu-b) labelled for workload type vm-passthrough"),
        "{message}"
    );
}

#[test]
fn the_vfio_manager_is_deployed_so_not_reported() {
    let mut spec = ClusterPolicySpec {
        sandbox_workloads: Some(SandboxWorkloadsSpec {
            enabled: Some(true),
            default_workload: Some(WorkloadConfig::VmPassthrough),
            ..SandboxWorkloadsSpec::default()
        }),
        vfio_manager: Some(VfioManagerSpec {
            enabled: Some(true),
            ..VfioManagerSpec::default()
        }),
        ..ClusterPolicySpec::default()
    };
    let nodes = [node("gpu-a", None), node("gpu-b", Some("vm-vgpu"))];
    let message = check(&spec, &nodes).unwrap();
    assert!(!message.contains("vfioManager"), "{message}");
    // The rest of the sandbox stack is still missing, so sandboxWorkloads is still reported.
    for part in [
        "sandboxWorkloads.enabled=true",
        "1 node(s) (gpu-a) labelled for workload type vm-passthrough get the sandbox validator and the VFIO manager only",
        "1 node(s) (gpu-b) labelled for workload type vm-vgpu get the sandbox validator only",
    ] {
        assert!(message.contains(part), "{part} not in {message}");
    }
    if let Some(vfio) = spec.vfio_manager.as_mut() {
        vfio.enabled = Some(false);
    }
    let message = check(&spec, &nodes).unwrap();
    assert!(
        message.contains(
            "(gpu-a) labelled for workload type vm-passthrough get the sandbox validator only"
        ),
        "{message}"
    );
    // The Sandbox reporter no longer reads the VFIO manager's image.
    assert!(
        Sandbox::IMAGES
            .iter()
            .all(|i| i.var != "VFIO_MANAGER_IMAGE")
    );
}

#[test]
fn the_sandbox_device_plugins_are_deployed_so_not_reported() {
    let mut spec = ClusterPolicySpec {
        sandbox_workloads: Some(SandboxWorkloadsSpec {
            enabled: Some(true),
            ..SandboxWorkloadsSpec::default()
        }),
        sandbox_device_plugin: Some(SandboxDevicePluginSpec {
            enabled: Some(true),
            ..SandboxDevicePluginSpec::default()
        }),
        kata_sandbox_device_plugin: Some(KataSandboxDevicePluginSpec {
            enabled: Some(true),
            ..KataSandboxDevicePluginSpec::default()
        }),
        ..ClusterPolicySpec::default()
    };
    let nodes = [
        node("gpu-a", Some("vm-passthrough")),
        node("gpu-b", Some("vm-vgpu")),
    ];
    // `kubevirt` mode (the default): the KubeVirt plugin on every VM node.
    let message = check(&spec, &nodes).unwrap();
    assert!(!message.contains("DevicePlugin"), "{message}");
    for part in [
        "(gpu-a) labelled for workload type vm-passthrough get the sandbox validator and the sandbox device plugin only",
        "(gpu-b) labelled for workload type vm-vgpu get the sandbox validator and the sandbox device plugin only",
    ] {
        assert!(message.contains(part), "{part} not in {message}");
    }
    // `kata` mode: the Kata plugin on vm-passthrough nodes only.
    if let Some(sandbox) = spec.sandbox_workloads.as_mut() {
        sandbox.mode = Some(SandboxMode::Kata);
    }
    let message = check(&spec, &nodes).unwrap();
    assert!(!message.contains("DevicePlugin"), "{message}");
    for part in [
        "(gpu-a) labelled for workload type vm-passthrough get the sandbox validator and the sandbox device plugin only",
        "(gpu-b) labelled for workload type vm-vgpu get the sandbox validator only",
    ] {
        assert!(message.contains(part), "{part} not in {message}");
    }
    // The Sandbox reporter no longer reads the plugins' images.
    assert!(
        Sandbox::IMAGES
            .iter()
            .all(|i| !i.var.contains("SANDBOX_DEVICE_PLUGIN"))
    );
}

#[test]
fn the_vgpu_manager_is_deployed_so_not_reported() {
    let spec = ClusterPolicySpec {
        sandbox_workloads: Some(SandboxWorkloadsSpec {
            enabled: Some(true),
            ..SandboxWorkloadsSpec::default()
        }),
        vgpu_manager: Some(VgpuManagerSpec {
            enabled: Some(true),
            ..VgpuManagerSpec::default()
        }),
        ..ClusterPolicySpec::default()
    };
    let nodes = [
        node("gpu-a", Some("vm-passthrough")),
        node("gpu-b", Some("vm-vgpu")),
    ];
    let message = check(&spec, &nodes).unwrap();
    assert!(!message.contains("vgpuManager"), "{message}");
    for part in [
        "(gpu-a) labelled for workload type vm-passthrough get the sandbox validator only",
        "(gpu-b) labelled for workload type vm-vgpu get the vGPU manager and the sandbox validator only",
    ] {
        assert!(message.contains(part), "{part} not in {message}");
    }
    // The Sandbox reporter no longer reads the vGPU manager's image.
    assert!(
        Sandbox::IMAGES
            .iter()
            .all(|i| i.var != "VGPU_MANAGER_IMAGE")
    );
}

#[test]
fn the_operands_of_a_vm_node_read_as_a_list() {
    let all = [(true, "a"), (true, "b"), (true, "c")];
    assert_eq!(super::deployed(&all), "a, b and c only");
    assert_eq!(super::deployed(&all[..1]), "a only");
    assert_eq!(super::deployed(&[(false, "a")]), "no GPU operands");
}
