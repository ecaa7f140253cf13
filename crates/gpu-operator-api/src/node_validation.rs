//! The validator's per-node summary annotation: each validator condition's status and reason on
//! one line, so the operator can sum up every node from its metadata-only Node cache (Node
//! conditions live in `status`, which that cache does not hold).
//!
//! Format: `GPUDriverReady=True/DriverValidated,GPUToolkitReady=False/NvidiaSmiNotInjected,…`.

use std::collections::BTreeMap;

use crate::conditions::node;

/// Annotation the validator keeps on its node.
pub const ANNOTATION: &str = "nvidia.com/gpu-operator.validation";

/// The condition types the summary carries, in report order: the validator's container checks,
/// its sandbox checks (the sandbox validator's, on VM nodes), then the GPU health agent's summary
/// (which the agent keeps in the annotation too).
pub const TYPES: [&str; 10] = [
    node::GPU_DRIVER_READY,
    node::GPU_TOOLKIT_READY,
    node::GPU_CUDA_READY,
    node::GPU_DEVICE_PLUGIN_READY,
    node::GPU_STACK_READY,
    node::GPU_VFIO_PCI_READY,
    node::GPU_VGPU_MANAGER_READY,
    node::GPU_VGPU_DEVICES_READY,
    node::GPU_CC_MANAGER_READY,
    node::GPU_HEALTHY,
];

/// One condition in the summary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Whether the condition is `True`.
    pub ready: bool,
    /// Its reason.
    pub reason: String,
}

/// Encodes `entries` (condition type → entry) as the annotation value.
pub fn encode(entries: &BTreeMap<String, Entry>) -> String {
    TYPES
        .iter()
        .filter_map(|t| {
            entries.get(*t).map(|e| {
                format!(
                    "{t}={}/{}",
                    if e.ready { "True" } else { "False" },
                    e.reason
                )
            })
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Decodes an annotation value; malformed parts are skipped.
pub fn decode(value: &str) -> BTreeMap<String, Entry> {
    value
        .split(',')
        .filter_map(|part| {
            let (type_, rest) = part.split_once('=')?;
            let (status, reason) = rest.split_once('/')?;
            Some((
                type_.trim().to_owned(),
                Entry {
                    ready: status == "True",
                    reason: reason.trim().to_owned(),
                },
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_in_report_order() {
        let mut entries = BTreeMap::new();
        entries.insert(
            node::GPU_STACK_READY.to_owned(),
            Entry {
                ready: false,
                reason: "ToolkitNotReady".into(),
            },
        );
        entries.insert(
            node::GPU_DRIVER_READY.to_owned(),
            Entry {
                ready: true,
                reason: "DriverValidated".into(),
            },
        );
        let value = encode(&entries);
        assert_eq!(
            value,
            "GPUDriverReady=True/DriverValidated,GPUStackReady=False/ToolkitNotReady"
        );
        assert_eq!(decode(&value), entries);
        assert!(decode("garbage,,x=y").is_empty());
    }
}
