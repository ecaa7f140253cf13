//! Which resource API offers a GPU node's GPUs to pods: the ClusterPolicy's device plugin
//! (`nvidia.com/gpu` as an extended resource) or the GPUCluster's DRA driver (ResourceSlices of
//! `gpu.nvidia.com`). Never both on one node: the two would hand out the same GPUs twice.
//!
//! - Only a ClusterPolicy: every node is `device-plugin` (NVIDIA's behaviour).
//! - Only a GPUCluster: every GPU node is `dra`.
//! - Both (ours; NVIDIA's operator refuses to label nodes while both exist): per node pool, by
//!   the node label `nvidia.com/gpu.resource-api`: `dra` puts the node on the DRA stack,
//!   `device-plugin` or no label leaves it on the device plugin. A pool switches by relabelling,
//!   each node once no workload there holds a GPU through the API it leaves
//!   ([`crate::api_switch`]: meanwhile it keeps its current gates and a Warning Event
//!   `ResourceAPISwitchWaiting` names the holders). Another value is said once in a Warning Event on the node (`InvalidResourceAPI`) and read
//!   as `device-plugin`.
//!
//! A GPUCluster counts while it exists, also while it is being deleted: its finalizer holds
//! until the DRA stack is torn down, and the kubelet plugin must outlive the claims it prepared
//! (NVIDIA keeps its gate for the same reason); once the object is gone the DRA gates go and the
//! device plugin's gate comes back.
//!
//! What a `dra` node gets, beside the ClusterPolicy's gates: `gpu.deploy.dra-driver`,
//! `gpu.deploy.dra-validator`, `gpu.deploy.dcgm-dra` and `gpu.deploy.dcgm-exporter-dra`; what it
//! loses: the device plugin's gate, the MIG manager's (as NVIDIA's GPUCluster, which deploys no
//! MIG manager: the DRA driver publishes the MIG devices the GPUs have), the sandbox (VM)
//! stack's (a DRA node is a container node whatever its workload config) and the ClusterPolicy's
//! DCGM and DCGM exporter (the GPUCluster's own serve the node). The driver, toolkit (CDI), GFD,
//! node status exporter and operator validator gates stay as the ClusterPolicy has them: it
//! still serves them there.

use std::collections::BTreeMap;

use gpu_operator_api::labels::{self, operand};
use gpu_operator_core::Context;
use kube::runtime::events::{Event, EventType};

use crate::workload::{self, deploy_label};

/// Reason of the Event about an unknown `nvidia.com/gpu.resource-api` value.
pub const REASON: &str = "InvalidResourceAPI";

/// How a node's GPUs are offered to pods.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResourceApi {
    /// The ClusterPolicy's device plugin.
    DevicePlugin,
    /// The GPUCluster's DRA driver.
    Dra,
}

/// Which owner kinds serve the GPU nodes now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Served {
    /// An active ClusterPolicy.
    pub policy: bool,
    /// A GPUCluster (also one being deleted, see the module header).
    pub gpu_cluster: bool,
}

/// The resource API of a node with `node_labels` while `served` (see the module header).
pub fn resource_api(node_labels: &BTreeMap<String, String>, served: Served) -> ResourceApi {
    match (served.policy, served.gpu_cluster) {
        (_, false) => ResourceApi::DevicePlugin,
        (false, true) => ResourceApi::Dra,
        (true, true) => {
            if node_labels
                .get(labels::GPU_RESOURCE_API)
                .map(String::as_str)
                == Some(labels::RESOURCE_API_DRA)
            {
                ResourceApi::Dra
            } else {
                ResourceApi::DevicePlugin
            }
        }
    }
}

/// The node's `nvidia.com/gpu.resource-api` label when both owners serve (the only time it is
/// read) and it is neither `dra` nor `device-plugin`.
pub fn invalid_value(node_labels: &BTreeMap<String, String>, served: Served) -> Option<&str> {
    if !(served.policy && served.gpu_cluster) {
        return None;
    }
    node_labels
        .get(labels::GPU_RESOURCE_API)
        .map(String::as_str)
        .filter(|v| ![labels::RESOURCE_API_DRA, labels::RESOURCE_API_DEVICE_PLUGIN].contains(v))
}

/// The gates a `dra` node gets: the DRA driver's and validator's, and the GPUCluster's DCGM and
/// DCGM exporter (their DaemonSets exist only while the GPUCluster enables them).
pub const DRA_GATES: [&str; 4] = [
    labels::DEPLOY_DRA_DRIVER,
    labels::DEPLOY_DRA_VALIDATOR,
    labels::DEPLOY_DCGM_DRA,
    labels::DEPLOY_DCGM_EXPORTER_DRA,
];

/// The gates a `dra` node must not carry: the device plugin's, the MIG manager's, every sandbox
/// (VM) operand's (every gate of the VM workload configs but `client`), and the ClusterPolicy's
/// DCGM and DCGM exporter (the GPUCluster's serve the node: they hold its GPUs by an
/// admin-access claim and map metrics to DRA-allocated pods).
pub fn off_on_dra_nodes() -> Vec<String> {
    let container = workload::state_labels(
        gpu_operator_api::spec::WorkloadConfig::Container,
        gpu_operator_api::spec::SandboxMode::Kubevirt,
    );
    let mut off: Vec<String> = workload::all_state_labels()
        .into_iter()
        .filter(|key| !container.contains(key))
        .chain([
            deploy_label(operand::DEVICE_PLUGIN),
            deploy_label(operand::DCGM),
            deploy_label(operand::DCGM_EXPORTER),
        ])
        .collect();
    off.sort();
    off.dedup();
    off
}

/// The Event's message.
pub fn message(node: &str, value: &str) -> String {
    format!(
        "node {node} is labelled {key}={value:?}, which is neither {dra} nor {plugin}: its GPUs \
         stay with the ClusterPolicy's device plugin; set the label to {dra} to move the node to \
         the GPUCluster's DRA driver, or to {plugin} (or remove it)",
        key = labels::GPU_RESOURCE_API,
        dra = labels::RESOURCE_API_DRA,
        plugin = labels::RESOURCE_API_DEVICE_PLUGIN,
    )
}

/// Publishes the Warning about `node`; a refusal is logged, not retried.
pub async fn publish(ctx: &Context, node: &str, value: &str) {
    let said = message(node, value);
    tracing::warn!(node, value, "{said}");
    let event = Event {
        type_: EventType::Warning,
        reason: REASON.to_owned(),
        note: Some(said),
        action: "FallBackToDevicePlugin".to_owned(),
        secondary: None,
    };
    ctx.one_off_events.publish_on_node(node, &event).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: Served = Served {
        policy: true,
        gpu_cluster: false,
    };
    const CLUSTER: Served = Served {
        policy: false,
        gpu_cluster: true,
    };
    const BOTH: Served = Served {
        policy: true,
        gpu_cluster: true,
    };

    fn labelled(value: &str) -> BTreeMap<String, String> {
        BTreeMap::from([(labels::GPU_RESOURCE_API.to_owned(), value.to_owned())])
    }

    #[test]
    fn the_owner_present_decides_and_with_both_the_node_label() {
        let none = BTreeMap::new();
        let dra = labelled("dra");
        let plugin = labelled("device-plugin");
        let bogus = labelled("DRA");
        for node in [&none, &dra, &plugin, &bogus] {
            assert_eq!(resource_api(node, POLICY), ResourceApi::DevicePlugin);
            assert_eq!(resource_api(node, CLUSTER), ResourceApi::Dra);
        }
        assert_eq!(resource_api(&dra, BOTH), ResourceApi::Dra);
        assert_eq!(resource_api(&plugin, BOTH), ResourceApi::DevicePlugin);
        assert_eq!(resource_api(&none, BOTH), ResourceApi::DevicePlugin);
        assert_eq!(resource_api(&bogus, BOTH), ResourceApi::DevicePlugin);
    }

    #[test]
    fn only_an_unknown_value_read_with_both_owners_is_invalid() {
        assert_eq!(invalid_value(&labelled("DRA"), BOTH), Some("DRA"));
        assert_eq!(invalid_value(&labelled("dra"), BOTH), None);
        assert_eq!(invalid_value(&labelled("device-plugin"), BOTH), None);
        assert_eq!(invalid_value(&BTreeMap::new(), BOTH), None);
        assert_eq!(invalid_value(&labelled("DRA"), POLICY), None, "not read");
        assert_eq!(invalid_value(&labelled("DRA"), CLUSTER), None, "not read");
    }

    #[test]
    fn a_dra_node_loses_the_device_plugin_the_mig_manager_and_the_sandbox_gates() {
        let off: Vec<String> = off_on_dra_nodes()
            .iter()
            .map(|l| l.trim_start_matches(labels::GPU_DEPLOY_PREFIX).to_owned())
            .collect();
        assert_eq!(
            off,
            [
                "cc-manager",
                "dcgm",
                "dcgm-exporter",
                "device-plugin",
                "kata-manager",
                "kata-sandbox-device-plugin",
                "mig-manager",
                "sandbox-device-plugin",
                "sandbox-validator",
                "vfio-manager",
                "vgpu-device-manager",
                "vgpu-manager"
            ]
        );
    }

    #[test]
    fn the_message_names_the_value_the_fallback_and_the_fix() {
        assert_eq!(
            message("n1", "DRA"),
            "node n1 is labelled nvidia.com/gpu.resource-api=\"DRA\", which is neither dra nor \
             device-plugin: its GPUs stay with the ClusterPolicy's device plugin; set the label \
             to dra to move the node to the GPUCluster's DRA driver, or to device-plugin (or \
             remove it)"
        );
    }
}
