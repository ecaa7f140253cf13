//! The node upgrade states as NVIDIA names them (label `nvidia.com/gpu-driver-upgrade-state`),
//! and the node annotations the state machine reads and writes.

use std::fmt;

/// Annotation a user sets to `"true"` to ask for a node's driver to be upgraded (restarted) even
/// when its driver pod is in sync, or to retry a node in `upgrade-failed`. NVIDIA's name.
pub const UPGRADE_REQUESTED: &str = "nvidia.com/gpu-driver-upgrade-requested";
/// Annotation: when the node entered its current state (RFC 3339), for the waiting states'
/// timeouts across operator restarts.
pub const STATE_SINCE: &str = "nvidia.com/gpu-driver-upgrade.state-since";
/// Annotation: why the node's upgrade failed, while it is in `upgrade-failed`.
pub const FAILURE_REASON: &str = "nvidia.com/gpu-driver-upgrade.failure-reason";
/// Annotation: the uid of the driver pod to restart, written on entering `pod-restart-required`
/// (so a restart after an operator restart deletes that pod and never its replacement).
pub const RESTART_POD: &str = "nvidia.com/gpu-driver-upgrade.restart-pod-uid";

/// A node's place in the upgrade state machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum UpgradeState {
    /// The driver pod is out of sync (or an upgrade was requested): waiting for a slot.
    Required,
    /// Admitted: the node is cordoned next.
    CordonRequired,
    /// Cordoned: waiting for the pods of `waitForCompletion.podSelector` to finish.
    WaitForJobsRequired,
    /// Evicting the node's GPU pods (`gpuPodDeletion`).
    PodDeletionRequired,
    /// Draining the node (`drain`, when enabled).
    DrainRequired,
    /// Restarting the driver pod; waiting for the new one to be Ready.
    PodRestartRequired,
    /// Waiting for the node's validator pod to be Ready on the new driver.
    ValidationRequired,
    /// Uncordoning the node (unless it was cordoned before the upgrade).
    UncordonRequired,
    /// The node runs the desired driver.
    Done,
    /// The upgrade stopped on this node; it is retried only when a user asks.
    Failed,
}

impl UpgradeState {
    /// Every state, in the order a node goes through them.
    pub const ALL: [Self; 10] = [
        Self::Required,
        Self::CordonRequired,
        Self::WaitForJobsRequired,
        Self::PodDeletionRequired,
        Self::DrainRequired,
        Self::PodRestartRequired,
        Self::ValidationRequired,
        Self::UncordonRequired,
        Self::Done,
        Self::Failed,
    ];

    /// The label value, as NVIDIA writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Required => "upgrade-required",
            Self::CordonRequired => "cordon-required",
            Self::WaitForJobsRequired => "wait-for-jobs-required",
            Self::PodDeletionRequired => "pod-deletion-required",
            Self::DrainRequired => "drain-required",
            Self::PodRestartRequired => "pod-restart-required",
            Self::ValidationRequired => "validation-required",
            Self::UncordonRequired => "uncordon-required",
            Self::Done => "upgrade-done",
            Self::Failed => "upgrade-failed",
        }
    }

    /// The state a label value names; `None` for an empty or unknown value.
    pub fn parse(value: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == value)
    }

    /// Whether the node is between admission and done: it holds an upgrade slot.
    pub fn in_progress(self) -> bool {
        !matches!(self, Self::Required | Self::Done | Self::Failed)
    }
}

impl fmt::Display for UpgradeState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_nvidias() {
        // NVIDIA's values (reference §1.7; k8s-operator-libs), by hand.
        let nvidia = [
            "upgrade-required",
            "cordon-required",
            "wait-for-jobs-required",
            "pod-deletion-required",
            "drain-required",
            "pod-restart-required",
            "validation-required",
            "uncordon-required",
            "upgrade-done",
            "upgrade-failed",
        ];
        let ours: Vec<&str> = UpgradeState::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(ours, nvidia);
        for value in nvidia {
            assert_eq!(
                UpgradeState::parse(value).map(UpgradeState::as_str),
                Some(value)
            );
        }
        assert_eq!(UpgradeState::parse(""), None);
        assert_eq!(UpgradeState::parse("node-maintenance-required"), None);
    }
}
