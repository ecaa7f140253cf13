//! Alerts on our own metrics: the node status exporter's per-node gauges
//! (`gpu_operator_node_*`, which need `nodeStatusExporter.enabled`), NVIDIA's driver upgrade
//! gauges (`gpu_operator_nodes_upgrades_*`), the MIG watchdog's gauge and the operator's
//! reconcile metrics.

use super::{Alert, Group};
use crate::observability::Settings;

/// Node validation, advertised devices, driver upgrades and reconciling.
pub(super) fn alerts(s: &Settings) -> Vec<Alert> {
    let mut barriers = vec!["driver", "toolkit", "cuda"];
    if s.device_plugin {
        barriers.push("plugin");
    }
    let not_validated = barriers
        .iter()
        .map(|b| format!("(gpu_operator_node_{b}_ready == 0)"))
        .collect::<Vec<_>>()
        .join(" or ");
    vec![
        Alert {
            name: "GPUNodeNotValidated",
            group: Group::Stack,
            severity: "warning",
            expr: not_validated,
            for_: Some(s.not_validated_for.clone()),
            summary: "GPU stack on a node not validated".into(),
            description: format!(
                "The GPU stack on node {{{{ $labels.node }}}} has not passed validation ({}) for {}; GPU pods cannot start there.",
                barriers.join(", "),
                s.not_validated_for
            ),
        },
        Alert {
            name: "GPUDevicePluginNoDevices",
            group: Group::Stack,
            severity: "warning",
            expr: "(gpu_operator_node_device_plugin_devices_total == 0) and on (node) (gpu_operator_nvidia_pci_devices_total > 0)".into(),
            for_: Some(s.not_validated_for.clone()),
            summary: "GPU node advertises no GPUs".into(),
            description: format!(
                "Node {{{{ $labels.node }}}} has NVIDIA PCI devices but the device plugin has advertised 0 GPUs for {}.",
                s.not_validated_for
            ),
        },
        Alert {
            name: "GPUDriverUpgradeStuck",
            group: Group::Stack,
            severity: "warning",
            expr: format!(
                "(gpu_operator_nodes_upgrades_in_progress > 0) and on () (changes(gpu_operator_nodes_upgrades_done[{}]) == 0)",
                s.upgrade_stuck_for
            ),
            for_: Some(s.upgrade_stuck_for.clone()),
            summary: "GPU driver upgrade makes no progress".into(),
            description: format!(
                "{{{{ $value }}}} node(s) have been upgrading the GPU driver and none finished in {}; see the nvidia.com/gpu-driver-upgrade-state label of each node.",
                s.upgrade_stuck_for
            ),
        },
        Alert {
            name: "GPUDriverUpgradeFailed",
            group: Group::Stack,
            severity: "critical",
            expr: "gpu_operator_nodes_upgrades_failed > 0".into(),
            for_: Some("5m".into()),
            summary: "GPU driver upgrade failed on nodes".into(),
            description: "The GPU driver upgrade failed on {{ $value }} node(s); the nodes labelled nvidia.com/gpu-driver-upgrade-state=upgrade-failed name them.".into(),
        },
        Alert {
            name: "GPUMIGReconfigurationFailed",
            group: Group::Stack,
            severity: "critical",
            expr: "gpu_operator_mig_config_failed_nodes > 0".into(),
            for_: Some("5m".into()),
            summary: "MIG reconfiguration failed on nodes".into(),
            description: "The MIG layout failed to apply on {{ $value }} node(s), which offer no GPUs until it does; the ClusterPolicy's MIGManagerReady condition names them.".into(),
        },
        Alert {
            name: "GPUMIGReconfigurationStuck",
            group: Group::Stack,
            severity: "warning",
            expr: "gpu_operator_mig_config_stuck_nodes > 0".into(),
            for_: Some("5m".into()),
            summary: "MIG reconfiguration stuck on nodes".into(),
            description: "The MIG layout of {{ $value }} node(s) has been pending or rebooting past migManager.watchdog.timeoutSeconds; they offer no GPUs meanwhile. The ClusterPolicy's MIGManagerReady condition names them.".into(),
        },
        Alert {
            name: "GPUNodeUnhealthy",
            group: Group::Stack,
            severity: "warning",
            expr: "gpu_operator_gpu_unhealthy_nodes > 0".into(),
            for_: Some("5m".into()),
            summary: "GPU nodes report unhealthy GPUs".into(),
            description: "{{ $value }} GPU node(s) report GPUHealthy=False for {{ $labels.reason }}; the ClusterPolicy's NodesHealthy condition and each node's GPU conditions name the GPU and NVIDIA's recommended action.".into(),
        },
        Alert {
            name: "GPUOperatorReconcileFailing",
            group: Group::Stack,
            severity: "warning",
            expr: "sum by (reconciler, error) (rate(gpu_operator_reconcile_duration_seconds_count{error!=\"\"}[5m])) > 0 unless on (reconciler) sum by (reconciler) (rate(gpu_operator_reconcile_duration_seconds_count{error=\"\"}[5m])) > 0".into(),
            for_: Some(s.reconcile_failing_for.clone()),
            summary: "GPU operator reconciler keeps failing".into(),
            description: format!(
                "Reconciler {{{{ $labels.reconciler }}}} of the GPU operator has failed with {{{{ $labels.error }}}} without a success for {}; the ClusterPolicy's conditions and Events say why.",
                s.reconcile_failing_for
            ),
        },
    ]
}
