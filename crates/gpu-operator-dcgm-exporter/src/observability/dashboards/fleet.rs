//! The GPU fleet dashboard: how many GPUs, and utilisation, framebuffer memory, power and
//! temperature per node, GPU and pod; MIG instances; XID errors.

use super::{Dashboard, Kind, Panel};
use crate::observability::Settings;

/// The dashboard.
pub(super) fn dashboard(s: &Settings) -> Dashboard {
    let n = "node=~\"$node\"";
    let pod = s.pod_label;
    let ns = s.namespace_label;
    let per_gpu = "{{node}} GPU {{gpu}}";
    let series = |title, help, unit, expr: String, legend| Panel {
        title,
        help,
        kind: Kind::TimeSeries,
        unit,
        targets: vec![(expr, legend)],
    };
    Dashboard {
        uid: "gpu-operator-fleet",
        title: "GPU fleet",
        node_variable: Some("DCGM_FI_DEV_GPU_UTIL"),
        panels: [stats(n), vec![
            series(
                "Utilisation per GPU",
                "GPU utilisation (DCGM_FI_DEV_GPU_UTIL).",
                "percent",
                format!("DCGM_FI_DEV_GPU_UTIL{{{n}}}"),
                "{{node}} GPU {{gpu}} {{modelName}}",
            ),
            series(
                "Utilisation per pod",
                "Mean utilisation of the GPUs each pod holds.",
                "percent",
                format!("avg by ({ns}, {pod}) (DCGM_FI_DEV_GPU_UTIL{{{n}, {pod}!=\"\"}})"),
                "",
            ),
            series(
                "Framebuffer used per GPU",
                "Framebuffer memory in use (DCGM_FI_DEV_FB_USED).",
                "mbytes",
                format!("DCGM_FI_DEV_FB_USED{{{n}}}"),
                per_gpu,
            ),
            series(
                "Framebuffer used per pod",
                "Framebuffer memory of the GPUs each pod holds.",
                "mbytes",
                format!("sum by ({ns}, {pod}) (DCGM_FI_DEV_FB_USED{{{n}, {pod}!=\"\"}})"),
                "",
            ),
            series(
                "Power per GPU",
                "Power draw (DCGM_FI_DEV_POWER_USAGE).",
                "watt",
                format!("DCGM_FI_DEV_POWER_USAGE{{{n}}}"),
                per_gpu,
            ),
            series(
                "Temperature per GPU",
                "GPU temperature (DCGM_FI_DEV_GPU_TEMP).",
                "celsius",
                format!("DCGM_FI_DEV_GPU_TEMP{{{n}}}"),
                per_gpu,
            ),
            series(
                "MIG instances: graphics engine activity",
                "Share of time each MIG instance's engine is busy (DCGM_FI_PROF_GR_ENGINE_ACTIVE).",
                "percentunit",
                format!("DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{n}, GPU_I_ID!=\"\"}}"),
                "{{node}} GPU {{gpu}} {{GPU_I_PROFILE}} #{{GPU_I_ID}}",
            ),
            series(
                "MIG instances per profile",
                "How many MIG instances of each profile the selected nodes have.",
                "none",
                format!(
                    "count by (GPU_I_PROFILE) (DCGM_FI_DEV_FB_USED{{{n}, GPU_I_PROFILE!=\"\"}})"
                ),
                "{{GPU_I_PROFILE}}",
            ),
            Panel {
                title: "Last XID per GPU",
                help: "GPUs whose last XID error is not 0; see docs/runbooks.md for what each means.",
                kind: Kind::Table,
                unit: "none",
                targets: vec![(format!("DCGM_FI_DEV_XID_ERRORS{{{n}}} > 0"), "")],
            },
        ]]
        .concat(),
    }
}

/// GPUs, mean utilisation, framebuffer share and power of the GPUs matching `n`.
fn stats(n: &str) -> Vec<Panel> {
    let stat = |title, help, unit, expr: String| Panel {
        title,
        help,
        kind: Kind::Stat,
        unit,
        targets: vec![(expr, "")],
    };
    vec![
        stat(
            "GPUs",
            "GPUs reporting metrics (whole GPUs; MIG instances are counted below).",
            "none",
            format!("count(DCGM_FI_DEV_GPU_UTIL{{{n}}})"),
        ),
        stat(
            "Average utilisation",
            "Mean GPU utilisation over the selected GPUs.",
            "percent",
            format!("avg(DCGM_FI_DEV_GPU_UTIL{{{n}}})"),
        ),
        stat(
            "Framebuffer in use",
            "Framebuffer memory used over framebuffer memory used and free.",
            "percentunit",
            format!(
                "sum(DCGM_FI_DEV_FB_USED{{{n}}}) / (sum(DCGM_FI_DEV_FB_USED{{{n}}}) + sum(DCGM_FI_DEV_FB_FREE{{{n}}}))"
            ),
        ),
        stat(
            "Power draw",
            "Total power draw of the selected GPUs.",
            "watt",
            format!("sum(DCGM_FI_DEV_POWER_USAGE{{{n}}})"),
        ),
    ]
}
