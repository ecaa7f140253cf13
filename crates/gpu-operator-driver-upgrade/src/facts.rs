//! What the state machine knows about a node, its driver and validator pods, and the pods running
//! on it: plain data, filled from the caches and pod lists by [`crate::view`], read by the pure
//! [`crate::plan`].

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;

use crate::state::UpgradeState;

/// A GPU node as the state machine sees it.
#[allow(
    clippy::struct_excessive_bools,
    reason = "each is one fact of the node, read by name"
)]
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeFacts {
    /// Node name.
    pub name: String,
    /// `nvidia.com/gpu-driver-upgrade-state`; `None` when absent or not a known state.
    pub state: Option<UpgradeState>,
    /// `nvidia.com/gpu-driver-upgrade.skip=true`.
    pub skip: bool,
    /// `spec.unschedulable` (cordoned).
    pub unschedulable: bool,
    /// The node's `Ready` condition is `True`.
    pub ready: bool,
    /// Annotation `…node-initial-state.unschedulable=true`: cordoned before its upgrade began.
    pub initially_unschedulable: bool,
    /// Annotation `nvidia.com/gpu-driver-upgrade-requested=true`.
    pub requested: bool,
    /// When the node entered its state (our annotation).
    pub since: Option<Timestamp>,
    /// Why its upgrade failed (our annotation).
    pub failure: Option<String>,
    /// The uid of the driver pod to restart (our annotation).
    pub restart_pod: Option<String>,
    /// Annotation `nvidia.com/gpu-driver-upgrade-enabled=true`.
    pub upgrade_enabled: bool,
    /// Label `nvidia.com/gpu-operator.driver.owner`: the NVIDIADriver that deploys its driver.
    pub owner: Option<String>,
    /// Label `nvidia.com/gpu.deploy.client`: `true`, paused, or absent.
    pub client: Option<String>,
    /// The node's driver pod (the live one when an old one is still terminating).
    pub driver: Option<PodFacts>,
    /// The node's validator pod (`app=nvidia-operator-validator`).
    pub validator: Option<PodFacts>,
}

/// A driver or validator pod.
#[allow(
    clippy::struct_excessive_bools,
    reason = "each is one fact of the pod, read by name"
)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodFacts {
    /// Pod name.
    pub name: String,
    /// Pod uid.
    pub uid: String,
    /// `metadata.creationTimestamp`.
    pub created: Timestamp,
    /// The `Ready` condition is `True`.
    pub ready: bool,
    /// It is being deleted.
    pub terminating: bool,
    /// Driver pods: it runs what the DaemonSet asks for (see `gpu_operator_driver::in_sync`).
    pub in_sync: bool,
    /// Driver pods: this operator made it from an older template of its DaemonSet (its
    /// `pod-template-generation` is not the DaemonSet's generation). With `in_sync`, only what
    /// leaves the loaded driver alone changed (labels, annotations, tolerations, resources,
    /// probes): it is restarted in place. A pod another operator made (adopted from NVIDIA's)
    /// is not: switching operators restarts nothing.
    pub older_template: bool,
}

/// A pod running on a node being upgraded.
#[allow(
    clippy::struct_excessive_bools,
    reason = "each is one fact of the pod, read by name"
)]
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Workload {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// It requests an NVIDIA device: any `nvidia.com/` extended resource (GPUs, MIG devices,
    /// shared and passthrough GPUs).
    pub gpu: bool,
    /// `spec.runtimeClassName`: a pod of one of the NVIDIA runtime classes uses the GPUs without
    /// requesting any (`NVIDIA_VISIBLE_DEVICES=all`).
    pub runtime_class: Option<String>,
    /// `Succeeded` or `Failed`: it holds nothing.
    pub finished: bool,
    /// It is being deleted.
    pub terminating: bool,
    /// A DaemonSet owns it (drain leaves those, as `kubectl drain` does).
    pub daemonset: bool,
    /// A controller owns it, so it comes back elsewhere once evicted.
    pub controlled: bool,
    /// It uses an emptyDir volume, whose data an eviction loses.
    pub empty_dir: bool,
    /// A static (mirror) pod, which the API cannot evict.
    pub mirror: bool,
    /// Its `nodeSelector` names `nvidia.com/gpu.deploy.client` (NVIDIA v26.7's contract for
    /// third-party GPU clients): a DaemonSet's pod leaves once the label is paused.
    pub client: bool,
    /// The ResourceClaims it uses (by name, in its namespace).
    pub claims: Vec<String>,
    /// The first of `claims` allocated devices of NVIDIA's DRA driver (`gpu.nvidia.com`), looked
    /// up when the node's pods are listed.
    pub dra_claim: Option<String>,
}

impl Workload {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Why it holds the GPUs, and so keeps the driver in use, found from the pod alone: it
    /// requests an NVIDIA device (`""`: said by its name), holds a DRA claim on NVIDIA's driver,
    /// runs under one of `runtime_classes` (the NVIDIA ones), or selects the GPU-client label.
    /// Finished pods hold nothing.
    pub fn gpu_use(&self, runtime_classes: &[String]) -> Option<String> {
        if self.finished {
            None
        } else if self.gpu {
            Some(String::new())
        } else if let Some(claim) = &self.dra_claim {
            Some(format!("DRA claim {claim}"))
        } else if let Some(class) = self
            .runtime_class
            .as_ref()
            .filter(|c| runtime_classes.contains(c))
        {
            Some(format!("runtime class {class}"))
        } else {
            self.client
                .then(|| format!("nodeSelector {}", gpu_operator_api::labels::DEPLOY_CLIENT))
        }
    }
}
