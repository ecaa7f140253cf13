//! The operator dashboard: reconciliation state, GPU nodes and how many passed validation, the
//! stack's rollout per component across nodes (the node status exporter's barrier gauges),
//! advertised GPUs per node, driver upgrade progress, reconciles and their errors per operand, and
//! unhealthy GPU nodes by fault class.

use super::{Dashboard, Kind, Panel};

/// The dashboard.
pub(super) fn dashboard() -> Dashboard {
    let reconciles = "gpu_operator_reconcile_duration_seconds";
    let rate_ok =
        format!("sum by (reconciler) (rate({reconciles}_count{{error=\"\"}}[$__rate_interval]))");
    let rate_err = format!(
        "sum by (reconciler, error) (rate({reconciles}_count{{error!=\"\"}}[$__rate_interval]))"
    );
    let p95 = format!(
        "histogram_quantile(0.95, sum by (reconciler, le) (rate({reconciles}_bucket[$__rate_interval])))"
    );
    let mut panels = state_panels();
    panels.extend([
        Panel {
            title: "Reconciles per operand",
            help: "Successful reconciles per second, by reconciler.",
            kind: Kind::TimeSeries,
            unit: "ops",
            targets: vec![(rate_ok, "{{reconciler}}")],
        },
        Panel {
            title: "Reconcile errors per operand",
            help: "Failed reconciles per second, by reconciler and error category.",
            kind: Kind::TimeSeries,
            unit: "ops",
            targets: vec![(rate_err, "{{reconciler}}: {{error}}")],
        },
        Panel {
            title: "Reconcile duration (p95)",
            help: "95th percentile of one reconcile's duration, by reconciler.",
            kind: Kind::TimeSeries,
            unit: "s",
            targets: vec![(p95, "{{reconciler}}")],
        },
        Panel {
            title: "Unhealthy GPU nodes",
            help: "GPU nodes whose GPU health agent reports GPUHealthy=False, by fault class; the nodes' GPU conditions say which GPU and what to do.",
            kind: Kind::TimeSeries,
            unit: "none",
            targets: vec![(
                "sum by (reason) (gpu_operator_gpu_unhealthy_nodes)".to_owned(),
                "{{reason}}",
            )],
        },
        Panel {
            title: "Nodes not validated",
            help: "GPU nodes whose CUDA validation barrier is closed.",
            kind: Kind::Table,
            unit: "none",
            targets: vec![("gpu_operator_node_cuda_ready == 0".to_owned(), "")],
        },
    ]);
    Dashboard {
        uid: "gpu-operator-operator",
        title: "GPU operator",
        node_variable: None,
        panels,
    }
}

/// Reconciliation state, nodes, rollout per component, advertised GPUs and driver upgrades.
fn state_panels() -> Vec<Panel> {
    let panel = |title, help, kind, unit, targets: Vec<(&str, &'static str)>| Panel {
        title,
        help,
        kind,
        unit,
        targets: targets
            .into_iter()
            .map(|(expr, legend)| (expr.to_owned(), legend))
            .collect(),
    };
    vec![
        panel(
            "Reconciliation status",
            "1 ready, 0 operands not ready, -1 no ClusterPolicy, -2 reconciling failed.",
            Kind::Stat,
            "none",
            vec![("gpu_operator_reconciliation_status", "")],
        ),
        panel(
            "GPU nodes",
            "Nodes with an NVIDIA GPU.",
            Kind::Stat,
            "none",
            vec![("gpu_operator_gpu_nodes_total", "")],
        ),
        panel(
            "Nodes validated",
            "GPU nodes whose CUDA validation (the last barrier, after driver and toolkit) passed.",
            Kind::Stat,
            "none",
            vec![("sum(gpu_operator_node_cuda_ready)", "")],
        ),
        panel(
            "Since everything was last ready",
            "Time since a reconciliation last found every operand ready.",
            Kind::Stat,
            "s",
            vec![(
                "time() - gpu_operator_reconciliation_last_success_ts_seconds",
                "",
            )],
        ),
        panel(
            "Stack rollout per component",
            "GPU nodes whose validation barrier of each component is open.",
            Kind::TimeSeries,
            "none",
            vec![
                ("sum(gpu_operator_node_driver_ready)", "driver"),
                ("sum(gpu_operator_node_toolkit_ready)", "toolkit"),
                ("sum(gpu_operator_node_plugin_ready)", "device plugin"),
                ("sum(gpu_operator_node_cuda_ready)", "cuda"),
                ("count(gpu_operator_node_driver_ready)", "nodes reporting"),
            ],
        ),
        panel(
            "GPUs advertised per node",
            "GPU devices the device plugin advertises on each node (-1: unknown).",
            Kind::TimeSeries,
            "none",
            vec![("gpu_operator_node_device_plugin_devices_total", "{{node}}")],
        ),
        panel(
            "Driver upgrades",
            "Nodes in each state of the driver upgrade.",
            Kind::TimeSeries,
            "none",
            vec![
                ("gpu_operator_nodes_upgrades_pending", "pending"),
                ("gpu_operator_nodes_upgrades_in_progress", "in progress"),
                ("gpu_operator_nodes_upgrades_done", "done"),
                ("gpu_operator_nodes_upgrades_failed", "failed"),
                ("gpu_operator_nodes_upgrades_available", "available"),
            ],
        ),
    ]
}
