//! Node label sets of the reference fleet (`gpu-ecosystem.md` §9.7) and ClusterPolicy specs,
//! for the tests of the labelling rules.

use std::collections::BTreeMap;

use gpu_operator_api::{
    ClusterPolicySpec,
    spec::{
        MigManagerSpec, MigPartedConfigSpec, SandboxMode, SandboxWorkloadsSpec, WorkloadConfig,
    },
};

/// Labels from `key=value` pairs.
pub fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// `base` with `extra` added (or overriding) and `removed` removed.
pub fn with(
    base: &BTreeMap<String, String>,
    extra: &[(&str, &str)],
    removed: &[&str],
) -> BTreeMap<String, String> {
    let mut out = base.clone();
    out.extend(labels(extra));
    for key in removed {
        out.remove(*key);
    }
    out
}

const NFD_UBUNTU: [(&str, &str); 4] = [
    (
        "feature.node.kubernetes.io/kernel-version.full",
        "6.8.0-1021-aws",
    ),
    ("feature.node.kubernetes.io/system-os_release.ID", "ubuntu"),
    (
        "feature.node.kubernetes.io/system-os_release.VERSION_ID",
        "22.04",
    ),
    ("feature.node.kubernetes.io/cpu-model.vendor_id", "Intel"),
];

/// The container deploy labels of an NVIDIA operator before `client` existed, all `true`.
pub const CONTAINER_DEPLOY_TRUE: [(&str, &str); 8] = [
    ("nvidia.com/gpu.deploy.driver", "true"),
    ("nvidia.com/gpu.deploy.gpu-feature-discovery", "true"),
    ("nvidia.com/gpu.deploy.container-toolkit", "true"),
    ("nvidia.com/gpu.deploy.device-plugin", "true"),
    ("nvidia.com/gpu.deploy.dcgm", "true"),
    ("nvidia.com/gpu.deploy.dcgm-exporter", "true"),
    ("nvidia.com/gpu.deploy.node-status-exporter", "true"),
    ("nvidia.com/gpu.deploy.operator-validator", "true"),
];

/// N1 as NFD and GFD leave it, before the operator labels it: 8×H100 SXM, MIG-capable.
pub fn n1_h100_fresh() -> BTreeMap<String, String> {
    with(
        &labels(&NFD_UBUNTU),
        &[
            ("feature.node.kubernetes.io/pci-10de.present", "true"),
            ("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"),
            ("nvidia.com/gpu.count", "8"),
            ("nvidia.com/gpu.memory", "81559"),
            ("nvidia.com/gpu.family", "hopper"),
            ("nvidia.com/gpu.machine", "p5.48xlarge"),
            ("nvidia.com/mig.capable", "true"),
            ("nvidia.com/mig.strategy", "single"),
            ("nvidia.com/mps.capable", "false"),
            ("nvidia.com/vgpu.present", "false"),
        ],
        &[],
    )
}

/// N1 as NVIDIA's operator (before `client` existed) leaves it.
pub fn n1_h100_labelled() -> BTreeMap<String, String> {
    let mut out = with(
        &n1_h100_fresh(),
        &[
            ("nvidia.com/gpu.present", "true"),
            ("nvidia.com/gpu.deploy.mig-manager", "true"),
            ("nvidia.com/gpu-driver-upgrade-state", "upgrade-done"),
            ("nvidia.com/mig.config", "all-disabled"),
            ("nvidia.com/mig.config.state", "success"),
        ],
        &[],
    );
    out.extend(labels(&CONTAINER_DEPLOY_TRUE));
    out
}

/// N1-pending: the MIG manager is changing the layout and has paused the GPU clients.
pub fn n1_pending() -> BTreeMap<String, String> {
    with(
        &n1_h100_labelled(),
        &[
            ("nvidia.com/mig.config", "all-1g.10gb"),
            ("nvidia.com/mig.config.state", "pending"),
            (
                "nvidia.com/gpu.deploy.device-plugin",
                "paused-for-mig-change",
            ),
            (
                "nvidia.com/gpu.deploy.gpu-feature-discovery",
                "paused-for-mig-change",
            ),
            ("nvidia.com/gpu.deploy.dcgm", "paused-for-mig-change"),
            (
                "nvidia.com/gpu.deploy.dcgm-exporter",
                "paused-for-mig-change",
            ),
            ("nvidia.com/gpu.deploy.client", "paused-for-mig-change"),
        ],
        &[],
    )
}

/// N2 before the operator: 4×A100-SXM4-80GB, RHEL 9.4, MIG mixed.
pub fn n2_a100_fresh() -> BTreeMap<String, String> {
    with(
        &labels(&NFD_UBUNTU),
        &[
            ("feature.node.kubernetes.io/system-os_release.ID", "rhel"),
            (
                "feature.node.kubernetes.io/system-os_release.VERSION_ID",
                "9.4",
            ),
            ("feature.node.kubernetes.io/pci-10de.present", "true"),
            ("nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"),
            ("nvidia.com/gpu.count", "4"),
            ("nvidia.com/gpu.replicas", "0"),
            ("nvidia.com/mig.capable", "true"),
            ("nvidia.com/mig.strategy", "mixed"),
            ("nvidia.com/mig.config", "all-balanced"),
            ("nvidia.com/mig.config.state", "success"),
        ],
        &[],
    )
}

/// N3: 1×T4 with a host-installed driver (`driver=pre-installed`), not MIG-capable.
pub fn n3_t4() -> BTreeMap<String, String> {
    with(
        &labels(&NFD_UBUNTU),
        &[
            ("feature.node.kubernetes.io/pci-10de.present", "true"),
            ("nvidia.com/gpu.present", "true"),
            ("nvidia.com/gpu.deploy.driver", "pre-installed"),
            ("nvidia.com/device-plugin.config", "t4-ts4"),
            ("nvidia.com/gpu.product", "Tesla-T4-SHARED"),
            ("nvidia.com/gpu.replicas", "4"),
            ("nvidia.com/gpu.sharing-strategy", "time-slicing"),
            ("nvidia.com/mig.capable", "false"),
            ("nvidia.com/mig.strategy", "single"),
        ],
        &[],
    )
}

/// N4: a CPU-only node; NFD labels only.
pub fn n4_cpu() -> BTreeMap<String, String> {
    labels(&NFD_UBUNTU)
}

/// N4-former-GPU: stale operator labels, but NFD no longer reports a GPU.
pub fn n4_former_gpu() -> BTreeMap<String, String> {
    with(
        &n1_h100_labelled(),
        &[],
        &["feature.node.kubernetes.io/pci-10de.present"],
    )
}

/// A vGPU host: A100 product, host driver label, no `mig.capable`.
pub fn vgpu_host() -> BTreeMap<String, String> {
    with(
        &labels(&NFD_UBUNTU),
        &[
            ("feature.node.kubernetes.io/pci-10de.present", "true"),
            ("nvidia.com/gpu.product", "NVIDIA-A100-PCIE-40GB"),
            ("nvidia.com/vgpu.host-driver-version", "550.90.05"),
        ],
        &[],
    )
}

/// The ClusterPolicy everyone starts with: every section empty.
pub fn default_policy() -> ClusterPolicySpec {
    ClusterPolicySpec::default()
}

/// A policy with the MIG manager set as given.
pub fn mig_policy(enabled: Option<bool>, default: Option<&str>) -> ClusterPolicySpec {
    ClusterPolicySpec {
        mig_manager: Some(MigManagerSpec {
            enabled,
            config: default.map(|d| MigPartedConfigSpec {
                name: None,
                default: Some(d.to_owned()),
            }),
            ..MigManagerSpec::default()
        }),
        ..ClusterPolicySpec::default()
    }
}

/// A policy with sandbox workloads enabled.
pub fn sandbox_policy(
    default: Option<WorkloadConfig>,
    mode: Option<SandboxMode>,
) -> ClusterPolicySpec {
    ClusterPolicySpec {
        sandbox_workloads: Some(SandboxWorkloadsSpec {
            enabled: Some(true),
            default_workload: default,
            mode,
        }),
        ..ClusterPolicySpec::default()
    }
}
