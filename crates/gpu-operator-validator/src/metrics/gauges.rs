//! The node status exporter's gauges — NVIDIA's names, meanings and `node` label, so dashboards
//! and alerts written for `nvidia-node-status-exporter` keep working — their Prometheus text
//! exposition, and the pure readings behind them: status files, PCI vendors in sysfs, and the
//! GPU capacity of a Node; plus two of ours, the GPU health agent's conditions on the Node.

use std::{fmt::Write as _, fs, path::Path};

use gpu_operator_api::conditions::node as node_conditions;
use k8s_openapi::api::core::v1::Node;

use crate::{
    components::plugin::{GPU_RESOURCE, MIG_RESOURCE_PREFIX, advertised},
    config::Component,
    status_files,
};

/// PCI vendor id of NVIDIA, as sysfs writes it.
pub const NVIDIA_PCI_VENDOR: &str = "0x10de";
/// Where the PCI devices are, relative to the host root.
pub const PCI_DEVICES_DIR: &str = "sys/bus/pci/devices";

/// The summary gauge of the GPU health agent's report.
pub const HEALTHY: &str = "gpu_operator_node_gpu_healthy";
/// The per-fault-class gauge of the GPU health agent's report.
pub const FAULT: &str = "gpu_operator_node_gpu_fault";

/// One scrape's values. Counts are -1 when they could not be read, timestamps are Unix seconds
/// (0: never).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Gauges {
    /// When the exporter started.
    pub metrics_ready_ts: i64,
    /// Which status files exist.
    pub status_files: StatusFiles,
    /// The driver check passes now.
    pub driver_validation: bool,
    /// When the driver check last passed.
    pub driver_validation_last_success_ts: i64,
    /// GPU devices the device plugin advertises on the node; -1 when the Node cannot be read or
    /// the device plugin is disabled.
    pub device_plugin_devices: i64,
    /// When the node last advertised at least one GPU device.
    pub device_plugin_validation_last_success_ts: i64,
    /// NVIDIA PCI devices on the host; -1 when sysfs cannot be read.
    pub nvidia_pci_devices: i64,
    /// The GPU health agent's conditions on the Node.
    pub health: Health,
}

/// The GPU health agent's report on the Node (its conditions, see
/// [`gpu_operator_api::conditions::node::GPU_HEALTH_TYPES`]), as gauges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    /// `GPUHealthy`: 1 True, 0 False, -1 Unknown, not reported, or the Node unreadable.
    pub healthy: i64,
    /// Each fault condition the Node carries: its type, reason, and whether it is True.
    pub faults: Vec<(String, String, bool)>,
}

impl Default for Health {
    fn default() -> Self {
        Self {
            healthy: -1,
            faults: Vec::new(),
        }
    }
}

impl Health {
    /// The health conditions of `node` (none: unknown).
    pub fn of(node: &Node) -> Self {
        let conditions = node.status.as_ref().and_then(|s| s.conditions.as_ref());
        let mut health = Self::default();
        for c in conditions.into_iter().flatten() {
            if c.type_ == node_conditions::GPU_HEALTHY {
                health.healthy = match c.status.as_str() {
                    "True" => 1,
                    "False" => 0,
                    _ => -1,
                };
            } else if node_conditions::GPU_HEALTH_TYPES.contains(&c.type_.as_str()) {
                health.faults.push((
                    c.type_.clone(),
                    c.reason.clone().unwrap_or_default(),
                    c.status == "True",
                ));
            }
        }
        health
    }
}

/// The validator's barriers: which `*-ready` status files exist.
#[allow(
    clippy::struct_excessive_bools,
    reason = "one field per status file, as NVIDIA has one gauge each"
)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StatusFiles {
    /// `driver-ready`.
    pub driver: bool,
    /// `toolkit-ready`.
    pub toolkit: bool,
    /// `plugin-ready`.
    pub plugin: bool,
    /// `cuda-ready`.
    pub cuda: bool,
}

impl StatusFiles {
    /// Looks for each component's status file in `dir` (an unreadable directory has none).
    pub fn read(dir: &Path) -> Self {
        let ready = |c| dir.join(status_files::file_name(c)).exists();
        Self {
            driver: ready(Component::Driver),
            toolkit: ready(Component::Toolkit),
            plugin: ready(Component::Plugin),
            cuda: ready(Component::Cuda),
        }
    }
}

/// Counts the PCI devices of vendor [`NVIDIA_PCI_VENDOR`] under `<host_root>/sys/bus/pci/devices`
/// (GPUs, NVSwitches, their audio functions: what `lspci` lists as NVIDIA); -1 when the directory
/// cannot be read. A device whose `vendor` cannot be read is not counted.
pub fn count_nvidia_pci(host_root: &Path) -> i64 {
    let Ok(entries) = fs::read_dir(host_root.join(PCI_DEVICES_DIR)) else {
        return -1;
    };
    let nvidia = entries
        .filter_map(Result::ok)
        .filter(|e| {
            fs::read_to_string(e.path().join("vendor"))
                .is_ok_and(|v| v.trim().eq_ignore_ascii_case(NVIDIA_PCI_VENDOR))
        })
        .count();
    i64::try_from(nvidia).unwrap_or(i64::MAX)
}

/// The GPU devices a Node advertises, NVIDIA's count: the capacity of every `nvidia.com/gpu*`
/// (whole or shared GPUs) and `nvidia.com/mig-*` (MIG devices under the mixed strategy)
/// resource, summed — the same resources the `plugin` check looks for.
pub fn gpu_capacity(node: &Node) -> i64 {
    let Some(capacity) = node.status.as_ref().and_then(|s| s.capacity.as_ref()) else {
        return 0;
    };
    [GPU_RESOURCE, MIG_RESOURCE_PREFIX]
        .iter()
        .flat_map(|prefix| advertised(capacity, prefix))
        .map(|(_, count)| count)
        .sum()
}

/// The exposition of `gauges`: every gauge with its `node` label, in Prometheus text format
/// 0.0.4 (what NVIDIA's exporter serves).
pub fn render(node: &str, gauges: &Gauges) -> String {
    let flag = i64::from;
    let files = gauges.status_files;
    let rows: [(&str, &str, i64); 10] = [
        (
            "gpu_operator_node_metrics_ready_ts_seconds",
            "Unix time the node status exporter started",
            gauges.metrics_ready_ts,
        ),
        (
            "gpu_operator_node_driver_ready",
            "1 when the driver validation barrier (driver-ready) of the node is open, else 0",
            flag(files.driver),
        ),
        (
            "gpu_operator_node_toolkit_ready",
            "1 when the container toolkit validation barrier (toolkit-ready) of the node is open, else 0",
            flag(files.toolkit),
        ),
        (
            "gpu_operator_node_plugin_ready",
            "1 when the device plugin validation barrier (plugin-ready) of the node is open, else 0",
            flag(files.plugin),
        ),
        (
            "gpu_operator_node_cuda_ready",
            "1 when the CUDA validation barrier (cuda-ready) of the node is open, else 0",
            flag(files.cuda),
        ),
        (
            "gpu_operator_node_driver_validation",
            "1 when the driver check passes on the node, else 0",
            flag(gauges.driver_validation),
        ),
        (
            "gpu_operator_node_driver_validation_last_success_ts_seconds",
            "Unix time the driver check last passed (0: never)",
            gauges.driver_validation_last_success_ts,
        ),
        (
            "gpu_operator_node_device_plugin_devices_total",
            "GPU devices the device plugin advertises on the node; -1 when the node cannot be read or the device plugin is disabled",
            gauges.device_plugin_devices,
        ),
        (
            "gpu_operator_node_device_plugin_validation_last_success_ts_seconds",
            "Unix time GPU devices were last seen on the node (0: never)",
            gauges.device_plugin_validation_last_success_ts,
        ),
        (
            "gpu_operator_nvidia_pci_devices_total",
            "NVIDIA PCI devices on the node; -1 when they cannot be counted",
            gauges.nvidia_pci_devices,
        ),
    ];
    let label = escape_label(node);
    let mut out = rows
        .iter()
        .fold(String::new(), |mut out, (name, help, value)| {
            let _ = write!(
                out,
                "# HELP {name} {help}\n# TYPE {name} gauge\n{name}{{node=\"{label}\"}} {value}\n"
            );
            out
        });
    render_health(&mut out, &label, &gauges.health);
    out
}

/// The health agent's gauges: the summary, and one series per fault condition labelled with its
/// type and reason (the fault class).
fn render_health(out: &mut String, label: &str, health: &Health) {
    let _ = write!(
        out,
        "# HELP {HEALTHY} 1 when the GPU health agent reports the node's GPUs healthy (GPUHealthy=True), 0 when unhealthy, -1 when unknown or not reported\n\
         # TYPE {HEALTHY} gauge\n{HEALTHY}{{node=\"{label}\"}} {}\n\
         # HELP {FAULT} 1 while the GPU health condition `condition` is True with the fault class `reason`, 0 while it is False\n\
         # TYPE {FAULT} gauge\n",
        health.healthy
    );
    for (condition, reason, present) in &health.faults {
        let _ = writeln!(
            out,
            "{FAULT}{{node=\"{label}\",condition=\"{}\",reason=\"{}\"}} {}",
            escape_label(condition),
            escape_label(reason),
            i64::from(*present)
        );
    }
}

/// A label value as the text format wants it: backslash, double quote and newline escaped.
fn escape_label(value: &str) -> String {
    value
        .replace('\\', r"\\")
        .replace('"', "\\\"")
        .replace('\n', r"\n")
}

#[cfg(test)]
mod tests;
