//! Alerts on the exporter's DCGM fields: hardware health, cost and workload symptoms. Fields the
//! exporter does not collect by default (ECC, throttling and NVLink error counters) make their
//! alerts silent until added with `dcgmExporter.config`; the runbook says so.

use super::{Alert, GPU_ON_NODE, Group, used_by};
use crate::observability::Settings;

const XID: &str = "DCGM_FI_DEV_XID_ERRORS";

/// XIDs, ECC, row remapping, throttling, temperature and NVLink errors.
pub(super) fn hardware(s: &Settings) -> Vec<Alert> {
    let mut all = memory_and_xids(s);
    all.extend(conditions(s));
    all
}

/// XIDs, ECC errors and row remapping.
fn memory_and_xids(s: &Settings) -> Vec<Alert> {
    let pod = used_by(s);
    let critical = s
        .critical_xids
        .iter()
        .map(|x| format!("({XID} == {x})"))
        .collect::<Vec<_>>()
        .join(" or ");
    let not_critical = s
        .critical_xids
        .iter()
        .map(|x| format!(" and {XID} != {x}"))
        .collect::<Vec<_>>()
        .concat();
    vec![
        Alert {
            name: "GPUCriticalXid",
            group: Group::Hardware,
            severity: "critical",
            expr: critical,
            for_: None,
            summary: "GPU reported an XID error that needs it drained and reset".into(),
            description: format!(
                "{GPU_ON_NODE} reported XID {{{{ $value }}}}{pod}; the GPU is unusable or losing memory until it is reset."
            ),
        },
        Alert {
            name: "GPUXidError",
            group: Group::Hardware,
            severity: "warning",
            expr: format!("{XID} > 0{not_critical}"),
            for_: None,
            summary: "GPU reported an XID error".into(),
            description: format!("{GPU_ON_NODE} reported XID {{{{ $value }}}}{pod}."),
        },
        Alert {
            name: "GPUDoubleBitEccError",
            group: Group::Hardware,
            severity: "critical",
            expr: "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL > 0".into(),
            for_: None,
            summary: "GPU memory had uncorrectable (double-bit) ECC errors".into(),
            description: format!(
                "{GPU_ON_NODE} counted {{{{ $value }}}} double-bit ECC errors since its last reset{pod}."
            ),
        },
        Alert {
            name: "GPURowRemapFailure",
            group: Group::Hardware,
            severity: "critical",
            expr: "DCGM_FI_DEV_ROW_REMAP_FAILURE > 0".into(),
            for_: None,
            summary: "GPU memory row remapping failed".into(),
            description: format!(
                "{GPU_ON_NODE} could not remap a failing memory row{pod}; the GPU needs service."
            ),
        },
    ]
}

/// Throttling, temperature and NVLink errors.
fn conditions(s: &Settings) -> Vec<Alert> {
    let pod = used_by(s);
    let throttling = |name, field: &str, why: &str| Alert {
        name,
        group: Group::Hardware,
        severity: "warning",
        expr: format!("rate({field}[5m]) / 1e9 * 100 > {}", s.throttling_percent),
        for_: Some("10m".into()),
        summary: format!("GPU clocks held back by {why} limits"),
        description: format!(
            "{GPU_ON_NODE} spent {{{{ $value | printf \"%.0f\" }}}}% of the last 5 minutes throttled by {why} limits{pod}."
        ),
    };
    vec![
        throttling(
            "GPUThermalThrottling",
            "DCGM_FI_DEV_THERMAL_VIOLATION",
            "thermal",
        ),
        throttling("GPUPowerThrottling", "DCGM_FI_DEV_POWER_VIOLATION", "power"),
        Alert {
            name: "GPUTemperatureHigh",
            group: Group::Hardware,
            severity: "warning",
            expr: format!("DCGM_FI_DEV_GPU_TEMP > {}", s.temperature_celsius),
            for_: Some(s.temperature_for.clone()),
            summary: format!("GPU hotter than {} °C", s.temperature_celsius),
            description: format!(
                "{GPU_ON_NODE} is at {{{{ $value }}}} °C, above {} °C for {}{pod}.",
                s.temperature_celsius, s.temperature_for
            ),
        },
        Alert {
            name: "GPUNVLinkErrors",
            group: Group::Hardware,
            severity: "warning",
            expr: ["CRC_FLIT", "CRC_DATA", "REPLAY", "RECOVERY"]
                .iter()
                .map(|kind| {
                    format!("(increase(DCGM_FI_DEV_NVLINK_{kind}_ERROR_COUNT_TOTAL[10m]) > 0)")
                })
                .collect::<Vec<_>>()
                .join(" or "),
            for_: None,
            summary: "GPU NVLink errors".into(),
            description: format!(
                "{GPU_ON_NODE} counted {{{{ $value | printf \"%.0f\" }}}} NVLink errors in 10 minutes{pod}."
            ),
        },
    ]
}

/// GPUs allocated but idle, and GPUs not allocated at all.
pub(super) fn cost(s: &Settings) -> Vec<Alert> {
    let (pod, ns) = (s.pod_label, s.namespace_label);
    vec![
        Alert {
            name: "GPUAllocatedIdle",
            group: Group::Cost,
            severity: "warning",
            expr: format!(
                "DCGM_FI_DEV_GPU_UTIL{{{pod}!=\"\"}} < {}",
                s.idle_utilization_percent
            ),
            for_: Some(s.idle_for.clone()),
            summary: "GPU allocated to a pod but idle".into(),
            description: format!(
                "{GPU_ON_NODE} is allocated to pod {{{{ $labels.{ns} }}}}/{{{{ $labels.{pod} }}}} but its utilisation has stayed below {}% for {}.",
                s.idle_utilization_percent, s.idle_for
            ),
        },
        Alert {
            name: "GPUUnallocated",
            group: Group::Cost,
            severity: "info",
            expr: format!("DCGM_FI_DEV_GPU_UTIL{{{pod}=\"\"}}"),
            for_: Some(s.unallocated_for.clone()),
            summary: "GPU not allocated to any pod".into(),
            description: format!(
                "{GPU_ON_NODE} has not been allocated to any pod for {}{}.",
                s.unallocated_for,
                used_by(s)
            ),
        },
    ]
}

/// Framebuffer leaks and stalled multi-GPU jobs.
pub(super) fn workload(s: &Settings) -> Vec<Alert> {
    let pod = used_by(s);
    let bandwidth = "rate(DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL[5m])";
    vec![
        Alert {
            name: "GPUMemoryLeak",
            group: Group::Workload,
            severity: "warning",
            expr: format!(
                "(predict_linear(DCGM_FI_DEV_FB_USED[1h], {}) > DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE) and (deriv(DCGM_FI_DEV_FB_USED[1h]) > 0)",
                s.memory_full_within_seconds
            ),
            for_: Some("30m".into()),
            summary: "GPU framebuffer use keeps growing".into(),
            description: format!(
                "Framebuffer use of {GPU_ON_NODE} has grown for the last hour and at this rate fills the framebuffer within {} hours{pod}.",
                s.memory_full_within_seconds.div_ceil(3600)
            ),
        },
        Alert {
            name: "GPUNVLinkStalled",
            group: Group::Workload,
            severity: "warning",
            expr: format!(
                "({bandwidth} == 0) and (max_over_time({bandwidth}[1h:5m]) > 0) and on (UUID) (DCGM_FI_DEV_GPU_UTIL > {})",
                s.busy_utilization_percent
            ),
            for_: Some(s.nvlink_stalled_for.clone()),
            summary: "NVLink traffic stopped on a busy GPU".into(),
            description: format!(
                "{GPU_ON_NODE} is busy but has sent nothing over NVLink for {} after sending before{pod}: a distributed (NCCL) job may be stalled.",
                s.nvlink_stalled_for
            ),
        },
    ]
}
