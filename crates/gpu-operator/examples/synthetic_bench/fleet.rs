//! The synthetic fleet: the live bench's node profiles (NFD, GFD and kwok labels), plus the CPU
//! feature labels NFD puts on every real node and the labels our operator adds, each node as the
//! operator's caches hold it (metadata-only `NodeMeta`, the GPU nodes' runtime) with the
//! validators' report of a node where everything is ready, and as the driver upgrade's watch
//! receives it (the full Node, after an upgrade: `upgrade-done`, cordon off, Ready). With the
//! GPUCluster beside the ClusterPolicy (`--dra`), every GPU node is labelled
//! `nvidia.com/gpu.resource-api=dra` and the labeller gives it the DRA gates.

use std::collections::BTreeMap;

use gpu_operator_api::ClusterPolicySpec;
use gpu_operator_core::cache::{node_meta::NodeMeta, node_runtime::NodeRuntime};
use gpu_operator_harness::fleet::{Fleet, Profile};
use gpu_operator_node_labels::{LabelChanges, resource_api::ResourceApi};
use k8s_openapi::{
    api::core::v1::{Node, NodeAddress, NodeCondition, NodeSpec, Taint},
    apimachinery::pkg::apis::meta::v1::Time,
    jiff::Timestamp,
};
use kube::core::PartialObjectMeta;

/// CPU flags NFD reports as `feature.node.kubernetes.io/cpu-cpuid.<FLAG>=true` on a current x86
/// server (a real node has this many and more: kernel config, PCI, storage, network).
const CPUID: [&str; 40] = [
    "ADX",
    "AESNI",
    "AMXBF16",
    "AMXINT8",
    "AMXTILE",
    "AVX",
    "AVX2",
    "AVX512BF16",
    "AVX512BITALG",
    "AVX512BW",
    "AVX512CD",
    "AVX512DQ",
    "AVX512F",
    "AVX512FP16",
    "AVX512IFMA",
    "AVX512VBMI",
    "AVX512VBMI2",
    "AVX512VL",
    "AVX512VNNI",
    "AVX512VPOPCNTDQ",
    "AVXVNNI",
    "CMPXCHG8",
    "FMA3",
    "FSRM",
    "FXSR",
    "FXSROPT",
    "GFNI",
    "HYPERVISOR",
    "LAHF",
    "MOVBE",
    "MOVDIR64B",
    "MOVDIRI",
    "OSXSAVE",
    "SERIALIZE",
    "SHA",
    "SPEC_CTRL_SSBD",
    "SYSCALL",
    "SYSEE",
    "VAES",
    "VPCLMULQDQ",
];

/// The validators' report on a node where every component is ready.
pub const READY_REPORT: &str = "GPUDriverReady=True/DriverValidated,GPUToolkitReady=True/ToolkitValidated,GPUCudaReady=True/CUDAValidated,GPUDevicePluginReady=True/PluginValidated,GPUStackReady=True/StackReady";

/// A fleet with about `gpu_nodes` GPU nodes in the live bench's mix (6 of 7 nodes have GPUs).
pub fn fleet(gpu_nodes: u32) -> anyhow::Result<Fleet> {
    Fleet::default().scaled_to(gpu_nodes.saturating_mul(7).div_ceil(6))
}

/// The label changes the node labeller decides for a node with `labels` under the ClusterPolicy
/// `spec`, with a GPUCluster too when the GPU nodes are on `api` DRA.
pub fn label_changes(
    labels: &BTreeMap<String, String>,
    spec: &ClusterPolicySpec,
    api: ResourceApi,
) -> LabelChanges {
    gpu_operator_node_labels::decide_served(labels, Some(spec), api == ResourceApi::Dra).changes
}

/// The labels node `name` of `profile` has before our operator labels it: its own, and on `api`
/// DRA a GPU node's pool label that puts it on the DRA stack.
fn own_labels(profile: Profile, name: &str, api: ResourceApi) -> BTreeMap<String, String> {
    let mut labels = profile.labels(name);
    if api == ResourceApi::Dra && profile.gpu_count() > 0 {
        labels.insert(
            gpu_operator_api::labels::GPU_RESOURCE_API.to_owned(),
            gpu_operator_api::labels::RESOURCE_API_DRA.to_owned(),
        );
    }
    labels
}

/// The labels of node `name` of `profile` once our operator labelled it for `spec` (and `api`).
pub fn labels(
    profile: Profile,
    name: &str,
    spec: &ClusterPolicySpec,
    api: ResourceApi,
) -> BTreeMap<String, String> {
    let mut labels = own_labels(profile, name, api);
    for flag in CPUID {
        labels.insert(
            format!("feature.node.kubernetes.io/cpu-cpuid.{flag}"),
            "true".to_owned(),
        );
    }
    labels.insert(
        "topology.kubernetes.io/zone".to_owned(),
        "us-east-1a".to_owned(),
    );
    for (key, value) in label_changes(&labels, spec, api) {
        match value {
            Some(value) => labels.insert(key, value),
            None => labels.remove(&key),
        };
    }
    labels
}

/// Node `name` of `profile` as the node cache holds it, at `version`.
pub fn node_meta(
    profile: Profile,
    name: &str,
    spec: &ClusterPolicySpec,
    api: ResourceApi,
    version: u64,
) -> NodeMeta {
    let mut node = PartialObjectMeta::<Node>::default();
    node.metadata.name = Some(name.to_owned());
    node.metadata.uid = Some(format!("00000000-0000-0000-0000-{version:012}"));
    node.metadata.resource_version = Some(version.to_string());
    node.metadata.labels = Some(labels(profile, name, spec, api));
    if profile.gpu_count() > 0 {
        node.metadata.annotations = Some(BTreeMap::from([(
            gpu_operator_api::node_validation::ANNOTATION.to_owned(),
            READY_REPORT.to_owned(),
        )]));
    }
    node.into()
}

/// The runtime cache entry of GPU node `name` of `profile`.
pub fn node_runtime(profile: Profile, name: &str) -> NodeRuntime {
    let runtime = profile
        .node(name)
        .status
        .and_then(|s| s.node_info)
        .map(|i| i.container_runtime_version)
        .unwrap_or_default();
    NodeRuntime::new(name, &runtime)
}

/// Node `name` of `profile` as it joins: its own labels, none of ours, no validator report yet.
pub fn arriving(profile: Profile, name: &str, api: ResourceApi) -> NodeMeta {
    let mut node = PartialObjectMeta::<Node>::default();
    node.metadata = profile.node(name).metadata;
    node.metadata.labels = Some(own_labels(profile, name, api));
    node.metadata.uid = Some(format!("uid-{name}"));
    node.metadata.resource_version = Some("1".to_owned());
    node.into()
}

/// When the synthetic objects were made and last moved.
pub const CREATED: &str = "2026-11-20T08:00:00Z";

/// A time as the API server writes it.
pub fn time(text: &str) -> Option<Time> {
    text.parse::<Timestamp>().ok().map(Time)
}

/// GPU node `name` of `profile` as the API server sends it to a full-Node watch: the cached
/// labels plus the upgrade's, the kubelet's annotations, spec and status (conditions, addresses,
/// capacity, node info), at `version`.
pub fn full_node(
    profile: Profile,
    name: &str,
    spec: &ClusterPolicySpec,
    api: ResourceApi,
    version: u64,
) -> Node {
    let mut node = profile.node(name);
    let mut labels = labels(profile, name, spec, api);
    labels.insert(
        gpu_operator_api::labels::DRIVER_UPGRADE_STATE.to_owned(),
        "upgrade-done".to_owned(),
    );
    let meta = &mut node.metadata;
    meta.labels = Some(labels);
    meta.uid = Some(format!("00000000-0000-0000-0000-{version:012}"));
    meta.resource_version = Some(version.to_string());
    meta.creation_timestamp = time(CREATED);
    let annotations = meta.annotations.get_or_insert_with(BTreeMap::new);
    for (key, value) in [
        (gpu_operator_api::node_validation::ANNOTATION, READY_REPORT),
        (
            "nvidia.com/gpu-driver-upgrade.state-since",
            "2026-11-21T09:30:00Z",
        ),
        ("node.alpha.kubernetes.io/ttl", "0"),
        (
            "volumes.kubernetes.io/controller-managed-attach-detach",
            "true",
        ),
        (
            "nfd.node.kubernetes.io/feature-labels",
            "cpu-cpuid.ADX,cpu-cpuid.AESNI,cpu-cpuid.AVX,cpu-cpuid.AVX2,cpu-cpuid.AVX512F,pci-10de.present",
        ),
    ] {
        annotations.insert(key.to_owned(), value.to_owned());
    }
    node.spec = Some(NodeSpec {
        pod_cidr: Some("10.244.7.0/24".to_owned()),
        pod_cidrs: Some(vec!["10.244.7.0/24".to_owned()]),
        provider_id: Some(format!("kwok://{name}")),
        taints: Some(vec![Taint {
            key: "nvidia.com/gpu".to_owned(),
            effect: "NoSchedule".to_owned(),
            ..Taint::default()
        }]),
        ..NodeSpec::default()
    });
    if let Some(status) = node.status.as_mut() {
        let condition = |type_: &str, status: &str, reason: &str| NodeCondition {
            type_: type_.to_owned(),
            status: status.to_owned(),
            reason: Some(reason.to_owned()),
            message: Some(format!("kubelet reports {reason}")),
            last_heartbeat_time: time("2026-11-26T12:00:00Z"),
            last_transition_time: time(CREATED),
        };
        status.conditions = Some(vec![
            condition("MemoryPressure", "False", "KubeletHasSufficientMemory"),
            condition("DiskPressure", "False", "KubeletHasNoDiskPressure"),
            condition("PIDPressure", "False", "KubeletHasSufficientPID"),
            condition("Ready", "True", "KubeletReady"),
        ]);
        status.addresses = Some(vec![
            NodeAddress {
                type_: "InternalIP".to_owned(),
                address: format!("10.0.{}.{}", version / 250 % 250, version % 250),
            },
            NodeAddress {
                type_: "Hostname".to_owned(),
                address: name.to_owned(),
            },
        ]);
        if let Some(info) = status.node_info.as_mut() {
            info.boot_id = format!("boot-{version:032}");
            info.machine_id = format!("{version:032x}");
            info.system_uuid = format!("{version:032x}");
            "v1.36.3".clone_into(&mut info.kube_proxy_version);
        }
    }
    node
}
