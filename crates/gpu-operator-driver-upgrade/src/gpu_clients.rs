//! `pod-deletion-required`: every GPU user leaves the node before its driver restarts. Pods that
//! request an NVIDIA device, hold a DRA claim on NVIDIA's driver, run under an NVIDIA runtime
//! class or match `podDeletion.podSelector` are evicted under `gpuPodDeletion`'s rules. DaemonSet
//! pods come back when evicted, so NVIDIA v26.7's contract moves them: the node's
//! `nvidia.com/gpu.deploy.client` goes from `true` to `paused-for-driver-upgrade`, and the pods
//! whose `nodeSelector` names it are removed by their DaemonSet controller. DaemonSet GPU users
//! that do not select it are waited for, named as blocking, up to `gpuPodDeletion.timeoutSeconds`;
//! the upgrade then goes on with a Warning. The label is `true` again when the upgrade ends or
//! fails.

use std::time::Duration;

use gpu_operator_api::labels::{DEPLOY_CLIENT, PAUSED_FOR_DRIVER_UPGRADE};
use k8s_openapi::jiff::Timestamp;

use crate::{
    facts::{NodeFacts, Workload},
    plan::{NodeEvent, NodePatch, POLL, Step, Wait},
    policy::Policy,
    state::UpgradeState,
    transitions::{fail, move_to, move_to_restart, remove, waited},
};

/// The step of a node in `pod-deletion-required`.
pub(crate) fn pod_deletion(
    node: &NodeFacts,
    policy: &Policy,
    workloads: &[Workload],
    elapsed: Duration,
    step: &mut Step,
    now: Timestamp,
) {
    let next = if policy.drain.is_some() {
        UpgradeState::DrainRequired
    } else {
        UpgradeState::PodRestartRequired
    };
    if node.client.as_deref() == Some("true") {
        step.patch.client = Some(PAUSED_FOR_DRIVER_UPGRADE);
    }
    let evicted: Vec<&Workload> = workloads
        .iter()
        .filter(|w| policy.gpu_user(w) && !w.daemonset)
        .collect();
    if !evicted.is_empty() {
        let deletion = &policy.deletion;
        return remove(
            node,
            &evicted,
            deletion,
            "gpuPodDeletion",
            "GPU pod",
            next,
            elapsed,
            step,
            now,
        );
    }
    let timed_out = policy.deletion.timeout.filter(|t| elapsed >= *t);
    let leaving: Vec<String> = workloads
        .iter()
        .filter(|w| w.daemonset && w.client && !w.finished)
        .filter(|w| w.namespace != policy.operator_namespace)
        .map(Workload::key)
        .collect();
    if !leaving.is_empty() {
        return match timed_out {
            Some(timeout) => fail(
                node,
                step,
                &format!(
                    "{} DaemonSet pod(s) selecting {DEPLOY_CLIENT} still on the node after {}s (driver.upgradePolicy.gpuPodDeletion.timeoutSeconds) although the label is {PAUSED_FOR_DRIVER_UPGRADE}: {}",
                    leaving.len(),
                    timeout.as_secs(),
                    leaving.join(", ")
                ),
                now,
            ),
            None => {
                step.wait = Some(Wait {
                    reason: format!(
                        "waiting for {} GPU client pod(s) to leave ({DEPLOY_CLIENT}={PAUSED_FOR_DRIVER_UPGRADE}) for {}: {}",
                        leaving.len(),
                        waited(elapsed),
                        leaving.join(", ")
                    ),
                    recheck: Some(POLL),
                    stuck: elapsed >= POLL * 2,
                });
            }
        };
    }
    let staying: Vec<String> = workloads
        .iter()
        .filter(|w| w.daemonset && !w.client && !w.terminating && policy.gpu_user(w))
        .map(|w| policy.name_gpu_user(w))
        .collect();
    if !staying.is_empty() && timed_out.is_none() {
        let after = policy.deletion.timeout.map_or_else(
            || "it waits for them (gpuPodDeletion.timeoutSeconds is 0)".to_owned(),
            |t| format!("the driver restarts without them after {}s", t.as_secs()),
        );
        step.wait = Some(Wait {
            reason: format!(
                "{} DaemonSet pod(s) hold the GPU and eviction does not move them: {}; add {DEPLOY_CLIENT}: \"true\" to their DaemonSet's nodeSelector so they leave during driver upgrades, or remove them from the node; {after}",
                staying.len(),
                staying.join(", ")
            ),
            recheck: Some(POLL),
            stuck: true,
        });
        return;
    }
    if next == UpgradeState::PodRestartRequired {
        move_to_restart(node, step, now);
    } else {
        move_to(step, next, now);
    }
    if !staying.is_empty() {
        step.event = Some(NodeEvent {
            warning: true,
            reason: "DriverUpgradeGpuUsersRemain",
            note: format!(
                "restarting the driver on node {} while {} DaemonSet pod(s) still use the GPU (gpuPodDeletion.timeoutSeconds passed); they keep the driver in use, so the new driver pod may fail with \"driver is in use\" until they go: {}",
                node.name,
                staying.len(),
                staying.join(", ")
            ),
        });
    }
}

/// Sets `nvidia.com/gpu.deploy.client` back to `true` in `patch` when the upgrade paused it, or
/// drops a pause `patch` was about to write: the upgrade of the node ends here.
pub(crate) fn resume(node: &NodeFacts, patch: &mut NodePatch) {
    if patch.client == Some(PAUSED_FOR_DRIVER_UPGRADE) {
        patch.client = None;
    } else if node.client.as_deref() == Some(PAUSED_FOR_DRIVER_UPGRADE) {
        patch.client = Some("true");
    }
}
