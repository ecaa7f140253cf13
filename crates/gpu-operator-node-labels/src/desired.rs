//! The node-labelling contract (reference §1.5), as a pure function from a node's labels and the
//! active ClusterPolicy to the label changes the node needs. It follows NVIDIA's
//! `labelGPUNodes` / `updateGPUStateLabels` step by step:
//!
//! 1. `nvidia.com/gpu.present`: `true` when an NFD PCI label says the node has an NVIDIA GPU;
//!    flipped to `false` (never removed) when a node that had `true` loses them. A node that never
//!    was a GPU node gets nothing.
//! 2. A node whose `gpu.present` is not `true` loses every deploy label the operator manages.
//! 3. `nvidia.com/gpu.deploy.operands=false` removes every managed deploy label.
//! 4. Otherwise the labels of the other workload configs are swept (`mig-manager` only when the
//!    node is not `container`), and the node's own set is added where missing or empty, with
//!    `mig-manager` on MIG-capable `container` nodes. A non-empty value (`false`,
//!    `pre-installed`, `paused-for-mig-change`, …) is never overwritten.
//! 5. A MIG-capable GPU node without `nvidia.com/mig.config` gets `migManager.config.default`
//!    when the MIG manager is enabled.
//!
//! Ours on top of NVIDIA's: on a MIG-capable `container` node that asks for a MIG layout the MIG
//! manager has not applied yet, the missing deploy labels of the GPU clients are held back until
//! it has ([`crate::mig_layout`], NVIDIA/gpu-operator#2670).
//!
//! With a GPUCluster ([`decide_served`]), each GPU node's resource API
//! ([`crate::resource_api`]) decides between the device plugin's gates and the DRA gates
//! (`nvidia.com/gpu.deploy.dra-driver`, `nvidia.com/gpu.deploy.dra-validator`, set where missing
//! or empty like the others): a `dra` node is a `container` node without the device plugin,
//! the MIG manager (nor its seeded layout and layout wait) and the sandbox gates; a
//! `device-plugin` node never keeps the DRA gates. With only a GPUCluster, a GPU node gets the
//! DRA gates and loses those same gates, and the ClusterPolicy's other gates are left as they
//! are (no ClusterPolicy serves them). Rules 1 to 3 hold for the DRA gates too.

use std::collections::BTreeMap;

use gpu_operator_api::{
    ClusterPolicySpec,
    labels::{self, operand},
    spec::{MigPartedConfigSpec, MigWatchdogSpec, SandboxMode, WorkloadConfig},
};

use crate::{
    mig_layout::{self, LayoutWait},
    resource_api::{self, ResourceApi, Served},
    workload::{self, deploy_label},
};

/// Label changes for one node: `Some(value)` sets the label, `None` removes it. Empty when the
/// node already has what it should.
pub type LabelChanges = BTreeMap<String, Option<String>>;

/// The changes that bring `node_labels` in line with `policy` (the active ClusterPolicy).
pub fn label_changes(
    node_labels: &BTreeMap<String, String>,
    policy: &ClusterPolicySpec,
) -> LabelChanges {
    decide(node_labels, policy).changes
}

/// What the labeller decides for one node: its label changes, and the MIG layout it waits for
/// before the GPU clients' deploy labels come (`None` when it waits for none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// The label changes ([`label_changes`]).
    pub changes: LabelChanges,
    /// The MIG layout wait, on the node as the changes leave it.
    pub layout_wait: Option<LayoutWait>,
}

/// The [`Decision`] for `node_labels` under `policy` (the active ClusterPolicy), without a
/// GPUCluster.
pub fn decide(node_labels: &BTreeMap<String, String>, policy: &ClusterPolicySpec) -> Decision {
    decide_served(node_labels, Some(policy), false)
}

/// The [`Decision`] for `node_labels` while `policy` (the active ClusterPolicy, if any) and a
/// GPUCluster (`gpu_cluster`: whether one exists) serve the GPU nodes.
pub fn decide_served(
    node_labels: &BTreeMap<String, String>,
    policy: Option<&ClusterPolicySpec>,
    gpu_cluster: bool,
) -> Decision {
    let served = Served {
        policy: policy.is_some(),
        gpu_cluster,
    };
    decide_as(
        node_labels,
        policy,
        resource_api::resource_api(node_labels, served),
    )
}

/// The [`Decision`] for `node_labels` under `policy` (the active ClusterPolicy, if any) for a
/// node whose GPUs `api` offers, whatever its `nvidia.com/gpu.resource-api` label says: the
/// current API while its switch waits ([`crate::api_switch`]). Without a ClusterPolicy the node
/// is a DRA node.
pub fn decide_as(
    node_labels: &BTreeMap<String, String>,
    policy: Option<&ClusterPolicySpec>,
    api: ResourceApi,
) -> Decision {
    let mut desired = node_labels.clone();
    let layout_wait = if let Some(policy) = policy {
        apply_rules(&mut desired, policy, api)
    } else {
        apply_dra_only_rules(&mut desired);
        None
    };
    Decision {
        changes: diff(node_labels, &desired),
        layout_wait,
    }
}

/// What of the policy [`label_changes`] reads: the workload config nodes default to when sandbox
/// workloads are enabled (`None` when not), the sandbox mode, the MIG layout seeded, whether
/// the MIG manager is enabled (the MIG layout wait), and the MIG watchdog's settings
/// ([`crate::mig_watchdog`]). Any other spec change (a `mig.strategy` or `devicePlugin.config`
/// patch) changes no node's labels.
pub type PolicyInputs = (
    Option<WorkloadConfig>,
    SandboxMode,
    Option<String>,
    bool,
    Option<MigWatchdogSpec>,
);

/// The [`PolicyInputs`] of `policy`.
pub fn policy_inputs(policy: &ClusterPolicySpec) -> PolicyInputs {
    (
        policy.sandbox_default_workload(),
        policy.sandbox_mode(),
        mig_config_default(policy).map(str::to_owned),
        mig_layout::mig_manager_enabled(policy),
        policy.mig_manager.as_ref().and_then(|m| m.watchdog.clone()),
    )
}

/// Rewrites `labels` as the operator wants them (NVIDIA's in-place algorithm, plus the MIG
/// layout wait, which it returns), for a node whose GPUs `api` offers.
fn apply_rules(
    labels: &mut BTreeMap<String, String>,
    policy: &ClusterPolicySpec,
    api: ResourceApi,
) -> Option<LayoutWait> {
    reconcile_gpu_present(labels);
    if !is_true(labels, labels::GPU_PRESENT) {
        remove_all_state_labels(labels);
        return None;
    }
    // Seeded before the deploy labels (NVIDIA seeds after; the result is the same) so that a
    // seeded layout that changes MIG holds the GPU clients back in the same pass.
    if api == ResourceApi::DevicePlugin {
        seed_mig_config(labels, policy);
    }
    if operands_disabled(labels) {
        remove_all_state_labels(labels);
        None
    } else {
        update_state_labels(labels, policy, api)
    }
}

/// The rules without a ClusterPolicy (only a GPUCluster): rules 1 to 3, then the DRA gates
/// in, and the gates a DRA node must not carry out; the other gates are left alone.
fn apply_dra_only_rules(labels: &mut BTreeMap<String, String>) {
    reconcile_gpu_present(labels);
    if !runs_operands(labels) {
        remove_all_state_labels(labels);
        return;
    }
    for key in resource_api::off_on_dra_nodes() {
        labels.remove(&key);
    }
    update_dra_gates(labels, ResourceApi::Dra);
}

/// A GPU node (`nvidia.com/gpu.present=true`) whose operands are not disabled.
pub(crate) fn runs_operands(labels: &BTreeMap<String, String>) -> bool {
    is_true(labels, labels::GPU_PRESENT) && !operands_disabled(labels)
}

/// `nvidia.com/gpu.deploy.operands=false`: no operand on the node.
fn operands_disabled(labels: &BTreeMap<String, String>) -> bool {
    labels
        .get(labels::GPU_DEPLOY_OPERANDS)
        .is_some_and(|v| v == "false")
}

/// The DRA gates added where missing on a `dra` node (a non-empty value is kept, as for every
/// gate), removed from a `device-plugin` node.
fn update_dra_gates(labels: &mut BTreeMap<String, String>, api: ResourceApi) {
    for key in resource_api::DRA_GATES {
        match api {
            ResourceApi::Dra if is_missing(labels, key) => set(labels, key, "true"),
            ResourceApi::Dra => {}
            ResourceApi::DevicePlugin => {
                labels.remove(key);
            }
        }
    }
}

/// Whether an NFD label says the node has an NVIDIA PCI device.
pub fn has_gpu_pci_labels(node_labels: &BTreeMap<String, String>) -> bool {
    labels::NFD_GPU_PRESENT
        .iter()
        .any(|key| is_true(node_labels, key))
}

fn reconcile_gpu_present(labels: &mut BTreeMap<String, String>) {
    let has_gpu = has_gpu_pci_labels(labels);
    let present = is_true(labels, labels::GPU_PRESENT);
    if has_gpu && !present {
        set(labels, labels::GPU_PRESENT, "true");
    } else if !has_gpu && present {
        set(labels, labels::GPU_PRESENT, "false");
    }
}

fn remove_all_state_labels(labels: &mut BTreeMap<String, String>) {
    for key in workload::all_state_labels() {
        labels.remove(&key);
    }
    for key in resource_api::DRA_GATES {
        labels.remove(key);
    }
}

/// Sweeps the deploy labels of other workload configs and adds the node's own, except those
/// held back for a MIG layout (returned). A `dra` node is a `container` node without the gates
/// [`resource_api::off_on_dra_nodes`] names, plus the DRA gates.
fn update_state_labels(
    labels: &mut BTreeMap<String, String>,
    policy: &ClusterPolicySpec,
    api: ResourceApi,
) -> Option<LayoutWait> {
    let dra = api == ResourceApi::Dra;
    let config = if dra {
        WorkloadConfig::Container
    } else {
        workload::workload_config(labels, policy)
    };
    let mut effective = workload::state_labels(config, policy.sandbox_mode());
    if dra {
        let off = resource_api::off_on_dra_nodes();
        effective.retain(|key| !off.contains(key));
    }
    let mig_manager = deploy_label(operand::MIG_MANAGER);
    let mig_manager_kept = config == WorkloadConfig::Container && !dra;
    for key in workload::all_state_labels() {
        let keep = effective.contains(&key) || (key == mig_manager && mig_manager_kept);
        if !keep {
            labels.remove(&key);
        }
    }
    if mig_manager_kept && workload::mig_capable(labels) && is_missing(labels, &mig_manager) {
        set(labels, &mig_manager, "true");
    }
    update_dra_gates(labels, api);
    let layout_wait = if dra {
        None
    } else {
        mig_layout::layout_wait(labels, policy, config)
    };
    let held = layout_wait
        .as_ref()
        .map(|w| w.held.as_slice())
        .unwrap_or_default();
    for key in &effective {
        if is_missing(labels, key) && !held.contains(key) {
            set(labels, key, "true");
        }
    }
    layout_wait
}

fn seed_mig_config(labels: &mut BTreeMap<String, String>, policy: &ClusterPolicySpec) {
    if let Some(default) = mig_config_default(policy)
        && workload::mig_capable(labels)
        && is_missing(labels, labels::MIG_CONFIG)
    {
        set(labels, labels::MIG_CONFIG, default);
    }
}

/// The MIG layout to seed, or `None` when the MIG manager is disabled or the default is empty.
fn mig_config_default(policy: &ClusterPolicySpec) -> Option<&str> {
    match &policy.mig_manager {
        Some(mig_manager) if mig_manager.enabled == Some(false) => None,
        Some(mig_manager) => mig_manager.seeded_layout(),
        None => Some(MigPartedConfigSpec::DEFAULT_LAYOUT),
    }
}

fn is_true(labels: &BTreeMap<String, String>, key: &str) -> bool {
    labels.get(key).is_some_and(|v| v == "true")
}

/// Missing or empty: an empty value counts as absent.
fn is_missing(labels: &BTreeMap<String, String>, key: &str) -> bool {
    labels.get(key).is_none_or(String::is_empty)
}

fn set(labels: &mut BTreeMap<String, String>, key: &str, value: &str) {
    labels.insert(key.to_owned(), value.to_owned());
}

fn diff(before: &BTreeMap<String, String>, after: &BTreeMap<String, String>) -> LabelChanges {
    let set = after
        .iter()
        .filter(|(k, v)| before.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), Some(v.clone())));
    let removed = before
        .keys()
        .filter(|k| !after.contains_key(*k))
        .map(|k| (k.clone(), None));
    set.chain(removed).collect()
}

#[cfg(test)]
pub mod fixtures;
#[cfg(test)]
mod tests;
