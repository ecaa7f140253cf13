//! The synthetic fleet: the live bench's node profiles (NFD, GFD and kwok labels), plus the CPU
//! feature labels NFD puts on every real node and the labels our operator adds, each node as the
//! operator's caches hold it (metadata-only `NodeMeta`, the GPU nodes' runtime) with the
//! validators' report of a node where everything is ready.

use std::collections::BTreeMap;

use gpu_operator_api::ClusterPolicySpec;
use gpu_operator_core::cache::{node_meta::NodeMeta, node_runtime::NodeRuntime};
use gpu_operator_harness::fleet::{Fleet, Profile};
use k8s_openapi::api::core::v1::Node;
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
pub const READY_REPORT: &str = "GPUDriverReady=True/DriverValidated,GPUToolkitReady=True/ToolkitValidated,GPUDevicePluginReady=True/PluginValidated,GPUStackReady=True/StackReady";

/// A fleet with about `gpu_nodes` GPU nodes in the live bench's mix (6 of 7 nodes have GPUs).
pub fn fleet(gpu_nodes: u32) -> anyhow::Result<Fleet> {
    Fleet::default().scaled_to(gpu_nodes.saturating_mul(7).div_ceil(6))
}

/// The labels of node `name` of `profile` once our operator labelled it for `spec`.
pub fn labels(profile: Profile, name: &str, spec: &ClusterPolicySpec) -> BTreeMap<String, String> {
    let mut labels = profile.labels(name);
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
    for (key, value) in gpu_operator_node_labels::label_changes(&labels, spec) {
        match value {
            Some(value) => labels.insert(key, value),
            None => labels.remove(&key),
        };
    }
    labels
}

/// Node `name` of `profile` as the node cache holds it, at `version`.
pub fn node_meta(profile: Profile, name: &str, spec: &ClusterPolicySpec, version: u64) -> NodeMeta {
    let mut node = PartialObjectMeta::<Node>::default();
    node.metadata.name = Some(name.to_owned());
    node.metadata.uid = Some(format!("00000000-0000-0000-0000-{version:012}"));
    node.metadata.resource_version = Some(version.to_string());
    node.metadata.labels = Some(labels(profile, name, spec));
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
pub fn arriving(profile: Profile, name: &str) -> NodeMeta {
    let mut node = PartialObjectMeta::<Node>::default();
    node.metadata = profile.node(name).metadata;
    node.metadata.uid = Some(format!("uid-{name}"));
    node.metadata.resource_version = Some("1".to_owned());
    node.into()
}
