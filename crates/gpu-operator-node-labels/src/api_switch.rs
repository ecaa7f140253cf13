//! A node's switch between the device plugin and DRA ([`crate::resource_api`]), held until no
//! workload on the node holds a GPU through the API it leaves: never both on one node, and
//! running workloads keep their devices.
//!
//! - The node's current API is what its gates say now: `dra` while its DRA driver gate is on
//!   (set, not empty, not `false`), `device-plugin` while a gate a DRA node loses is on
//!   ([`resource_api::off_on_dra_nodes`]: the device plugin's, the MIG manager's, the sandbox
//!   stack's, DCGM's), none on a node that has neither yet (nothing to wait for). A switch is
//!   [`pending`] only while both a ClusterPolicy and a GPUCluster serve, on a GPU node with
//!   operands, whose `nvidia.com/gpu.resource-api` label wants the other API. Nothing is read
//!   for a node without a pending switch.
//! - `dra` → `device-plugin` waits while a ResourceClaim is allocated a device of our DRA drivers
//!   in the node's pool (the DRA driver's pool is the node's name): removing the kubelet plugin
//!   would leave the claim with nobody to unprepare it, and the device plugin would hand the
//!   same GPU out again. The GPUCluster's own pods' admin-access claims (DRA validator, DCGM,
//!   DCGM exporter) do not hold the switch: their gates go first ([`Step::ReleaseOwnClaims`])
//!   while the kubelet plugin stays to unprepare their claims, then the rest switches.
//! - `device-plugin` → `dra` waits while a pod on the node that has not finished requests or
//!   limits an `nvidia.com/` resource in a container or an init container (`nvidia.com/gpu`,
//!   `nvidia.com/mig-*`, the names time-slicing renames them to, passthrough GPUs): the DRA
//!   driver would publish GPUs that pod uses.
//!
//! While it waits the node keeps its current gates, and one Warning Event on the node (reason
//! [`WAITING_REASON`]) names up to [`NAMED_HOLDERS`] holders and the fix, once per distinct set
//! of holders; the node is looked at again every [`SWITCH_POLL`]. Pure: the reads are in
//! `api_switch_reads`.

use std::{collections::BTreeMap, time::Duration};

use gpu_operator_api::{
    gpu_cluster::claims::{self, HeldClaim},
    labels,
};
use k8s_openapi::api::{core::v1::Pod, resource::v1::ResourceClaim};
use kube::ResourceExt as _;

use crate::{
    desired::{self, LabelChanges},
    mig_recovery,
    resource_api::{self, ResourceApi, Served},
};

/// Reason of the Warning Event while a switch waits.
pub const WAITING_REASON: &str = "ResourceAPISwitchWaiting";
/// Reason of the Normal Event once a switch that waited is made.
pub const SWITCHED_REASON: &str = "ResourceAPISwitched";
/// How often a node whose switch waits is looked at again (the GPUCluster teardown's pace).
pub const SWITCH_POLL: Duration = Duration::from_secs(15);
/// How many holders the Event names; the rest are counted.
pub const NAMED_HOLDERS: usize = 5;

/// The gates of the GPUCluster's own pods that hold admin-access claims on the node.
pub const CLAIMING_GATES: [&str; 3] = [
    labels::DEPLOY_DRA_VALIDATOR,
    labels::DEPLOY_DCGM_DRA,
    labels::DEPLOY_DCGM_EXPORTER_DRA,
];

/// A node's switch from one resource API to the other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Switch {
    /// The API its gates offer its GPUs through now.
    pub from: ResourceApi,
    /// The API its label asks for.
    pub to: ResourceApi,
}

/// What a pending switch does now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Nothing holds a GPU through the current API: the gates switch.
    Switch,
    /// `dra` → `device-plugin` with no workload's claim left, but the GPUCluster's own pods'
    /// claims: their gates go first, the kubelet plugin stays to unprepare the claims.
    ReleaseOwnClaims,
    /// These workloads (sorted) hold GPUs through the current API: the gates stay. Empty when
    /// the read failed: the gates stay too, until a read succeeds.
    Wait(Vec<String>),
}

/// Whether a gate is on: set, not empty, not `false` (`paused-for-mig-change` is on: the
/// operand's workloads may still run).
fn on(node_labels: &BTreeMap<String, String>, key: &str) -> bool {
    node_labels
        .get(key)
        .is_some_and(|v| !v.is_empty() && v != "false")
}

/// The API the node's gates offer its GPUs through now (see the module header).
pub fn current(node_labels: &BTreeMap<String, String>) -> Option<ResourceApi> {
    if on(node_labels, labels::DEPLOY_DRA_DRIVER) {
        Some(ResourceApi::Dra)
    } else if resource_api::off_on_dra_nodes()
        .iter()
        .any(|key| on(node_labels, key))
    {
        Some(ResourceApi::DevicePlugin)
    } else {
        None
    }
}

/// The switch the node with `node_labels` asks for while `served`, if any (see the module
/// header): reads nothing, so it costs nothing on a node that stays.
pub fn pending(node_labels: &BTreeMap<String, String>, served: Served) -> Option<Switch> {
    if !(served.policy && served.gpu_cluster && desired::runs_operands(node_labels)) {
        return None;
    }
    let from = current(node_labels)?;
    let to = resource_api::resource_api(node_labels, served);
    (from != to).then_some(Switch { from, to })
}

/// The step of a `dra` → `device-plugin` switch of `node`, from every ResourceClaim of the
/// cluster (`operator_namespace`: where the GPUCluster's own pods run).
pub fn step_from_dra(claims: &[ResourceClaim], operator_namespace: &str, node: &str) -> Step {
    let held = claims::held_on_node(claims, operator_namespace, node);
    if !held.is_empty() {
        return Step::Wait(held.iter().map(claim_holder).collect());
    }
    if claims::ours_on_node(claims, operator_namespace, node).is_empty() {
        Step::Switch
    } else {
        Step::ReleaseOwnClaims
    }
}

/// The step of a `device-plugin` → `dra` switch, from the pods on the node.
pub fn step_to_dra(pods_on_node: &[Pod]) -> Step {
    let mut holders: Vec<String> = pods_on_node
        .iter()
        .filter(|pod| mig_recovery::uses_gpus(pod))
        .map(|pod| format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any()))
        .collect();
    holders.sort();
    if holders.is_empty() {
        Step::Switch
    } else {
        Step::Wait(holders)
    }
}

/// A claim as the Event names it: `namespace/claim (pod …)`.
fn claim_holder(claim: &HeldClaim) -> String {
    if claim.pods.is_empty() {
        format!("{}/{}", claim.namespace, claim.name)
    } else {
        format!(
            "{}/{} (pod {})",
            claim.namespace,
            claim.name,
            claim.pods.join(", ")
        )
    }
}

/// The API the node's gates follow at `step` of `switch`.
pub fn gates_api(switch: Switch, step: &Step) -> ResourceApi {
    match step {
        Step::Switch => switch.to,
        Step::ReleaseOwnClaims | Step::Wait(_) => switch.from,
    }
}

/// Turns `changes` (the gates of the `dra` node with `node_labels`) into the first half of its
/// switch away from DRA: the [`CLAIMING_GATES`] go, everything else stays as decided.
pub fn release_own_claims(node_labels: &BTreeMap<String, String>, changes: &mut LabelChanges) {
    for key in CLAIMING_GATES {
        if node_labels.contains_key(key) {
            changes.insert(key.to_owned(), None);
        } else {
            changes.remove(key);
        }
    }
}

fn api_name(api: ResourceApi) -> &'static str {
    match api {
        ResourceApi::Dra => "the GPUCluster's DRA driver",
        ResourceApi::DevicePlugin => "the ClusterPolicy's device plugin",
    }
}

/// The Warning's message while `holders` hold `node`'s `switch`.
pub fn waiting_message(node: &str, switch: Switch, holders: &[String]) -> String {
    let what = match switch.from {
        ResourceApi::Dra => "ResourceClaim(s) allocated its DRA devices",
        ResourceApi::DevicePlugin => "running pod(s) requesting its GPUs",
    };
    let more = holders.len().saturating_sub(NAMED_HOLDERS);
    let more = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    format!(
        "node {node} waits to move from {from} to {to} ({key}): {count} {what} still hold its \
         GPUs: {named}{more}; its gates stay until they are gone (checked every {poll}s). Delete \
         those workloads or let them finish; drain the node (kubectl drain {node} \
         --ignore-daemonsets) to hurry",
        from = api_name(switch.from),
        to = api_name(switch.to),
        key = labels::GPU_RESOURCE_API,
        count = holders.len(),
        named = holders
            .iter()
            .take(NAMED_HOLDERS)
            .cloned()
            .collect::<Vec<_>>()
            .join(", "),
        poll = SWITCH_POLL.as_secs(),
    )
}

/// The Normal Event's message once `node`'s `switch`, which waited, is made.
pub fn switched_message(node: &str, switch: Switch) -> String {
    format!(
        "node {node}: no workload holds its GPUs any more; they move from {} to {}",
        api_name(switch.from),
        api_name(switch.to)
    )
}

#[cfg(test)]
mod tests;
