//! What a GPU node is for, read from its labels and the ClusterPolicy: its workload config
//! (`container`, `vm-passthrough`, `vm-vgpu`), the `nvidia.com/gpu.deploy.<operand>` gates that
//! config needs, and whether its GPUs are MIG-capable. Pure; NVIDIA's `state_manager.go` rules.

use std::collections::BTreeMap;

use gpu_operator_api::{
    ClusterPolicySpec,
    labels::{self, operand},
    spec::{SandboxMode, WorkloadConfig},
};

/// The deprecated Kata manager's gate, which NVIDIA's labeller still sets on `vm-passthrough`
/// nodes (no operator deploys it); every other operand's is in
/// [`gpu_operator_api::labels::operand`].
pub const KATA_MANAGER: &str = "kata-manager";

/// Operands gated on `container` nodes (besides `mig-manager`, which depends on the hardware).
const CONTAINER: [&str; 9] = [
    operand::DRIVER,
    operand::GPU_FEATURE_DISCOVERY,
    operand::CONTAINER_TOOLKIT,
    operand::DEVICE_PLUGIN,
    operand::DCGM,
    operand::DCGM_EXPORTER,
    operand::NODE_STATUS_EXPORTER,
    operand::OPERATOR_VALIDATOR,
    operand::CLIENT,
];

/// Operands gated on `vm-passthrough` nodes in `kubevirt` mode.
const VM_PASSTHROUGH: [&str; 6] = [
    operand::SANDBOX_DEVICE_PLUGIN,
    operand::SANDBOX_VALIDATOR,
    operand::VFIO_MANAGER,
    KATA_MANAGER,
    operand::CC_MANAGER,
    operand::CLIENT,
];

/// Operands gated on `vm-vgpu` nodes.
const VM_VGPU: [&str; 6] = [
    operand::SANDBOX_DEVICE_PLUGIN,
    operand::VGPU_MANAGER,
    operand::VGPU_DEVICE_MANAGER,
    operand::SANDBOX_VALIDATOR,
    operand::CC_MANAGER,
    operand::CLIENT,
];

/// GPU products that support MIG, matched case-insensitively inside `nvidia.com/gpu.product`
/// when GPU Feature Discovery has not written `nvidia.com/mig.capable`.
const MIG_PRODUCTS: [&str; 3] = ["h100", "a100", "a30"];

/// The `nvidia.com/gpu.deploy.<operand>` label key of `operand`.
pub fn deploy_label(operand: &str) -> String {
    format!("{}{operand}", labels::GPU_DEPLOY_PREFIX)
}

/// The workload config of a node: its `nvidia.com/gpu.workload.config` label when sandbox
/// workloads are enabled and the label is valid, else `sandboxWorkloads.defaultWorkload`
/// (`container` unless set). Without sandbox workloads every node is `container`.
pub fn workload_config(
    node_labels: &BTreeMap<String, String>,
    policy: &ClusterPolicySpec,
) -> WorkloadConfig {
    let Some(default) = policy.sandbox_default_workload() else {
        return WorkloadConfig::Container;
    };
    node_labels
        .get(labels::GPU_WORKLOAD_CONFIG)
        .and_then(|name| WorkloadConfig::from_name(name))
        .unwrap_or(default)
}

/// The deploy labels a node of `config` gets (NVIDIA's `getEffectiveStateLabels`), without
/// `mig-manager`. In `kata` mode a `vm-passthrough` node gets the Kata sandbox device plugin
/// instead of the KubeVirt one.
pub fn state_labels(config: WorkloadConfig, mode: SandboxMode) -> Vec<String> {
    let operands: &[&str] = match config {
        WorkloadConfig::Container => &CONTAINER,
        WorkloadConfig::VmPassthrough => &VM_PASSTHROUGH,
        WorkloadConfig::VmVgpu => &VM_VGPU,
    };
    operands
        .iter()
        .map(|&operand| match (config, mode, operand) {
            (WorkloadConfig::VmPassthrough, SandboxMode::Kata, operand::SANDBOX_DEVICE_PLUGIN) => {
                operand::KATA_SANDBOX_DEVICE_PLUGIN
            }
            _ => operand,
        })
        .map(deploy_label)
        .collect()
}

/// Every deploy label the operator manages: those of all workload configs and modes, plus
/// `mig-manager`. Other `nvidia.com/gpu.deploy.*` labels (such as `operands`, or another
/// product's `nvsm`) are never touched, as in NVIDIA's operator.
pub fn all_state_labels() -> Vec<String> {
    let mut all: Vec<String> = CONTAINER
        .iter()
        .chain(&VM_PASSTHROUGH)
        .chain(&VM_VGPU)
        .chain(&[operand::KATA_SANDBOX_DEVICE_PLUGIN, operand::MIG_MANAGER])
        .map(|operand| deploy_label(operand))
        .collect();
    all.sort();
    all.dedup();
    all
}

/// Whether the node's GPUs support MIG: never on a vGPU host; else `nvidia.com/mig.capable`
/// when GPU Feature Discovery wrote it; else an H100, A100 or A30 `nvidia.com/gpu.product`.
pub fn mig_capable(node_labels: &BTreeMap<String, String>) -> bool {
    if node_labels
        .get(labels::VGPU_HOST_DRIVER_VERSION)
        .is_some_and(|v| !v.is_empty())
    {
        return false;
    }
    if let Some(capable) = node_labels.get(labels::MIG_CAPABLE) {
        return capable == "true";
    }
    node_labels.get(labels::GPU_PRODUCT).is_some_and(|product| {
        let product = product.to_lowercase();
        MIG_PRODUCTS.iter().any(|m| product.contains(m))
    })
}

#[cfg(test)]
mod tests {
    use gpu_operator_api::spec::SandboxWorkloadsSpec;

    use super::*;

    fn node(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn sandbox(default: Option<WorkloadConfig>, mode: Option<SandboxMode>) -> ClusterPolicySpec {
        ClusterPolicySpec {
            sandbox_workloads: Some(SandboxWorkloadsSpec {
                enabled: Some(true),
                default_workload: default,
                mode,
            }),
            ..ClusterPolicySpec::default()
        }
    }

    fn operands(config: WorkloadConfig, mode: SandboxMode) -> Vec<String> {
        let mut names: Vec<String> = state_labels(config, mode)
            .into_iter()
            .map(|l| l.trim_start_matches(labels::GPU_DEPLOY_PREFIX).to_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn label_sets_match_nvidia_per_config_and_mode() {
        assert_eq!(
            operands(WorkloadConfig::Container, SandboxMode::Kubevirt),
            [
                "client",
                "container-toolkit",
                "dcgm",
                "dcgm-exporter",
                "device-plugin",
                "driver",
                "gpu-feature-discovery",
                "node-status-exporter",
                "operator-validator"
            ]
        );
        assert_eq!(
            operands(WorkloadConfig::VmPassthrough, SandboxMode::Kubevirt),
            [
                "cc-manager",
                "client",
                "kata-manager",
                "sandbox-device-plugin",
                "sandbox-validator",
                "vfio-manager"
            ]
        );
        assert_eq!(
            operands(WorkloadConfig::VmPassthrough, SandboxMode::Kata),
            [
                "cc-manager",
                "client",
                "kata-manager",
                "kata-sandbox-device-plugin",
                "sandbox-validator",
                "vfio-manager"
            ]
        );
        // Kata mode changes only the passthrough set.
        for mode in [SandboxMode::Kubevirt, SandboxMode::Kata] {
            assert_eq!(
                operands(WorkloadConfig::VmVgpu, mode),
                [
                    "cc-manager",
                    "client",
                    "sandbox-device-plugin",
                    "sandbox-validator",
                    "vgpu-device-manager",
                    "vgpu-manager"
                ]
            );
        }
        let all = all_state_labels();
        assert_eq!(all.len(), 18, "{all:#?}");
        assert!(all.contains(&"nvidia.com/gpu.deploy.mig-manager".to_owned()));
        assert!(!all.contains(&labels::GPU_DEPLOY_OPERANDS.to_owned()));
    }

    #[test]
    fn workload_config_is_read_only_with_sandbox_workloads() {
        let vm = node(&[(labels::GPU_WORKLOAD_CONFIG, "vm-passthrough")]);
        assert_eq!(
            workload_config(&vm, &ClusterPolicySpec::default()),
            WorkloadConfig::Container
        );
        let disabled = ClusterPolicySpec {
            sandbox_workloads: Some(SandboxWorkloadsSpec {
                enabled: Some(false),
                default_workload: Some(WorkloadConfig::VmVgpu),
                mode: None,
            }),
            ..ClusterPolicySpec::default()
        };
        assert_eq!(workload_config(&vm, &disabled), WorkloadConfig::Container);
        assert_eq!(
            workload_config(&vm, &sandbox(None, None)),
            WorkloadConfig::VmPassthrough
        );
        let vgpu = node(&[(labels::GPU_WORKLOAD_CONFIG, "vm-vgpu")]);
        assert_eq!(
            workload_config(&vgpu, &sandbox(None, None)),
            WorkloadConfig::VmVgpu
        );
        let container = node(&[(labels::GPU_WORKLOAD_CONFIG, "container")]);
        let default_vgpu = sandbox(Some(WorkloadConfig::VmVgpu), None);
        assert_eq!(
            workload_config(&container, &default_vgpu),
            WorkloadConfig::Container
        );
    }

    #[test]
    fn an_invalid_or_missing_workload_config_falls_back_to_the_default() {
        let bogus = node(&[(labels::GPU_WORKLOAD_CONFIG, "vm-bogus")]);
        let none = node(&[]);
        assert_eq!(
            workload_config(&bogus, &sandbox(None, None)),
            WorkloadConfig::Container
        );
        let default_vgpu = sandbox(Some(WorkloadConfig::VmVgpu), None);
        assert_eq!(
            workload_config(&bogus, &default_vgpu),
            WorkloadConfig::VmVgpu
        );
        assert_eq!(
            workload_config(&none, &default_vgpu),
            WorkloadConfig::VmVgpu
        );
    }

    #[test]
    fn mig_capability_follows_gfd_then_the_product_and_never_on_vgpu_hosts() {
        let cases: [(&[(&str, &str)], bool); 11] = [
            (&[(labels::MIG_CAPABLE, "true")], true),
            (&[(labels::MIG_CAPABLE, "false")], false),
            (&[(labels::GPU_PRODUCT, "NVIDIA-A100-SXM4-80GB")], true),
            (&[(labels::GPU_PRODUCT, "NVIDIA-H100-80GB-HBM3")], true),
            (&[(labels::GPU_PRODUCT, "nvidia-a30")], true),
            (&[(labels::GPU_PRODUCT, "Tesla-T4")], false),
            (&[(labels::VGPU_HOST_DRIVER_VERSION, "535.54")], false),
            (
                &[
                    (labels::VGPU_HOST_DRIVER_VERSION, "535.54"),
                    (labels::MIG_CAPABLE, "true"),
                ],
                false,
            ),
            (
                &[
                    (labels::VGPU_HOST_DRIVER_VERSION, ""),
                    (labels::GPU_PRODUCT, "NVIDIA-A100"),
                ],
                true,
            ),
            (
                &[
                    (labels::MIG_CAPABLE, "false"),
                    (labels::GPU_PRODUCT, "NVIDIA-A100"),
                ],
                false,
            ),
            (&[], false),
        ];
        for (pairs, expected) in cases {
            assert_eq!(mig_capable(&node(pairs)), expected, "{pairs:?}");
        }
    }
}
