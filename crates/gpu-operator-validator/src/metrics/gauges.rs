//! The node status exporter's gauges — NVIDIA's names, meanings and `node` label, so dashboards
//! and alerts written for `nvidia-node-status-exporter` keep working — their Prometheus text
//! exposition, and the pure readings behind them: status files, PCI vendors in sysfs, and the
//! GPU capacity of a Node.

use std::{fmt::Write as _, fs, path::Path};

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

/// One scrape's values. Counts are -1 when they could not be read, timestamps are Unix seconds
/// (0: never).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
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
    rows.iter()
        .fold(String::new(), |mut out, (name, help, value)| {
            let _ = write!(
                out,
                "# HELP {name} {help}\n# TYPE {name} gauge\n{name}{{node=\"{label}\"}} {value}\n"
            );
            out
        })
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
