//! What the sandbox components share, as NVIDIA's validator has it: the node's workload config
//! (its `nvidia.com/gpu.workload.config` label when valid, else `DEFAULT_GPU_WORKLOAD_CONFIG`,
//! else `vm-passthrough`), written to `workload-type` before the check so the sandbox device
//! plugin knows which status file to wait for; and the gate: `vfio-pci` runs only on
//! `vm-passthrough` nodes, `vgpu-manager` and `vgpu-devices` only on `vm-vgpu` nodes, and elsewhere
//! they pass without a status file. `cc-manager` has no gate and no `workload-type`.

use std::{collections::BTreeMap, path::Path};

use gpu_operator_api::{
    labels::GPU_WORKLOAD_CONFIG,
    spec::WorkloadConfig,
    validator::{reason, status_file},
};
use k8s_openapi::api::core::v1::Node;
use kube::Api;

use super::{
    Failed, Outcome, api_error, cc_manager, not_required, vfio_pci, vgpu_devices, vgpu_manager,
};
use crate::{
    config::{Component, Config},
    status_files,
};

/// The node's workload config: its label when it holds a valid one, else `default`.
pub fn workload_of(labels: &BTreeMap<String, String>, default: WorkloadConfig) -> WorkloadConfig {
    labels
        .get(GPU_WORKLOAD_CONFIG)
        .and_then(|v| WorkloadConfig::from_name(v.trim()))
        .unwrap_or(default)
}

/// The workload config a gated component checks on; `None` for one without a gate.
pub fn needed_on(component: Component) -> Option<WorkloadConfig> {
    match component {
        Component::VfioPci => Some(WorkloadConfig::VmPassthrough),
        Component::VgpuManager | Component::VgpuDevices => Some(WorkloadConfig::VmVgpu),
        _ => None,
    }
}

/// Writes `workload-type` (NVIDIA's format: the name and a newline).
pub fn write_workload_type(dir: &Path, config: WorkloadConfig) -> Result<(), Failed> {
    status_files::write(
        dir,
        status_file::WORKLOAD_TYPE,
        &format!("{}\n", config.as_str()),
    )
    .map_err(|e| Failed::new(reason::STATUS_FILE_ERROR, e.to_string()))
}

/// Writes `workload-type` and decides whether a gated component runs here: `Some` is the outcome
/// when it must not (not needed on this workload config, or the file could not be written).
fn gate(cfg: &Config, labels: &BTreeMap<String, String>) -> Option<Outcome> {
    let needed = needed_on(cfg.component)?;
    let workload = workload_of(labels, cfg.default_workload);
    if let Err(failed) = write_workload_type(&cfg.output_dir, workload) {
        return Some(Err(failed));
    }
    (workload != needed).then(|| {
        not_required(format!(
            "{} is not needed on a {} node (only on {}; the node's {GPU_WORKLOAD_CONFIG} label, else DEFAULT_GPU_WORKLOAD_CONFIG)",
            cfg.component,
            workload.as_str(),
            needed.as_str()
        ))
    })
}

/// Runs a sandbox component on the node's labels (blocking: it reads sysfs and may run
/// `nvidia-smi`).
pub fn check_on(cfg: &Config, labels: &BTreeMap<String, String>) -> Outcome {
    let sysfs = || cfg.sysfs_root();
    match cfg.component {
        Component::CcManager => cc_manager::check(labels, &cfg.output_dir),
        Component::VfioPci => gate(cfg, labels).unwrap_or_else(|| vfio_pci::check(&sysfs())),
        Component::VgpuManager => {
            gate(cfg, labels).unwrap_or_else(|| vgpu_manager::check(cfg, &sysfs()))
        }
        Component::VgpuDevices => {
            gate(cfg, labels).unwrap_or_else(|| vgpu_devices::check(&sysfs()))
        }
        other @ (Component::Driver | Component::Toolkit | Component::Cuda | Component::Plugin) => {
            Err(Failed::permanent(
                reason::NOT_A_SANDBOX_COMPONENT,
                format!("{other} is not a sandbox component"),
            ))
        }
    }
}

/// Reads the node's labels, then runs [`check_on`] off the async runtime.
pub async fn check(cfg: &Config, client: &kube::Client) -> Outcome {
    let name = cfg.node_name.clone().unwrap_or_default();
    let nodes: Api<Node> = Api::all(client.clone());
    let node = nodes.get(&name).await.map_err(|e| {
        Failed::new(
            reason::API_ERROR,
            format!("reading node {name}'s labels: {}", api_error(&e)),
        )
    })?;
    let labels = node.metadata.labels.unwrap_or_default();
    let cfg = cfg.clone();
    tokio::task::spawn_blocking(move || check_on(&cfg, &labels))
        .await
        .unwrap_or_else(|e| {
            Err(Failed::new(
                reason::SYSFS_UNREADABLE,
                format!("the check crashed: {e}"),
            ))
        })
}

#[cfg(test)]
mod tests;
