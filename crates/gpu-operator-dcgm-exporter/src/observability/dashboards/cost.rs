//! The GPU cost dashboard: GPUs allocated to pods, how many of them sit idle (utilisation below
//! the `GPUAllocatedIdle` threshold), idle allocated GPU-hours and energy per namespace over the
//! dashboard's time range, and GPUs nobody holds.

use super::{Dashboard, Kind, Panel};
use crate::observability::Settings;

/// The dashboard.
pub(super) fn dashboard(s: &Settings) -> Dashboard {
    let n = "node=~\"$node\"";
    let (pod, ns) = (s.pod_label, s.namespace_label);
    let idle_below = s.idle_utilization_percent;
    let allocated = format!("DCGM_FI_DEV_GPU_UTIL{{{n}, {pod}!=\"\"}}");
    let idle = format!("({allocated} < {idle_below})");
    let panel = |title, help, kind, unit, targets| Panel {
        title,
        help,
        kind,
        unit,
        targets,
    };
    Dashboard {
        uid: "gpu-operator-cost",
        title: "GPU cost",
        node_variable: Some("DCGM_FI_DEV_GPU_UTIL"),
        panels: vec![
            panel(
                "GPUs allocated to pods",
                "GPUs a pod holds now.",
                Kind::Stat,
                "none",
                vec![(format!("count({allocated})"), "")],
            ),
            panel(
                "Allocated but idle",
                "GPUs a pod holds whose utilisation is below the idle threshold now.",
                Kind::Stat,
                "none",
                vec![(format!("count{idle}"), "")],
            ),
            panel(
                "Not allocated",
                "GPUs no pod holds now.",
                Kind::Stat,
                "none",
                vec![(
                    format!("count(DCGM_FI_DEV_GPU_UTIL{{{n}, {pod}=\"\"}})"),
                    "",
                )],
            ),
            panel(
                "Idle allocated GPU-hours",
                "GPU-hours in the time range that pods held GPUs below the idle threshold (1-minute resolution).",
                Kind::Stat,
                "h",
                vec![(
                    format!("sum(count_over_time({idle}[$__range:1m])) / 60"),
                    "",
                )],
            ),
            panel(
                "Idle allocated GPUs per namespace",
                "How many GPUs each namespace holds idle, over time.",
                Kind::TimeSeries,
                "none",
                vec![(format!("count by ({ns}) {idle}"), "")],
            ),
            panel(
                "Allocated GPUs per namespace",
                "How many GPUs each namespace holds, over time.",
                Kind::TimeSeries,
                "none",
                vec![(format!("count by ({ns}) ({allocated})"), "")],
            ),
            panel(
                "GPU-hours per namespace in the time range",
                "Allocated and idle allocated GPU-hours per namespace (1-minute resolution), and the energy its GPUs used.",
                Kind::Table,
                "h",
                vec![
                    (
                        format!("sum by ({ns}) (count_over_time({allocated}[$__range:1m])) / 60"),
                        "allocated",
                    ),
                    (
                        format!("sum by ({ns}) (count_over_time({idle}[$__range:1m])) / 60"),
                        "idle",
                    ),
                    (
                        format!(
                            "sum by ({ns}) (increase(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{n}, {pod}!=\"\"}}[$__range])) / 3.6e9"
                        ),
                        "kWh",
                    ),
                ],
            ),
            panel(
                "Idle allocated GPUs now",
                "Each GPU a pod holds below the idle threshold, with its utilisation.",
                Kind::Table,
                "percent",
                vec![(idle.clone(), "")],
            ),
        ],
    }
}
