//! Whether an operand DaemonSet counts as ready, by NVIDIA's rules: no pods wanted is ready;
//! RollingUpdate needs every desired pod updated and available for the current generation;
//! OnDelete needs every desired pod ready and on the DaemonSet's current revision (NVIDIA's
//! `isDaemonSetReady` compares each pod's `controller-revision-hash` with the newest
//! ControllerRevision; the DaemonSet controller makes that very comparison for every node and
//! reports the matches as `updatedNumberScheduled`, so that count is read instead of listing pods
//! and revisions).
//! Whatever the strategy, the DaemonSet controller must have observed the current generation:
//! a DaemonSet it has not counted yet says `desiredNumberScheduled: 0`, which is not "no pods
//! wanted".

use k8s_openapi::api::apps::v1::DaemonSet;

/// Counts that describe a DaemonSet's rollout.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rollout {
    /// Nodes that should run a pod.
    pub desired: i32,
    /// Nodes whose pod is ready (available for RollingUpdate).
    pub ready: i32,
    /// Nodes whose pod runs an older revision of the pod template (OnDelete: it changes only
    /// when the pod is deleted).
    pub outdated: i32,
    /// Whether the DaemonSet counts as ready.
    pub is_ready: bool,
    /// Whether it would count as ready if none of its pods were outdated.
    pub is_ready_but_outdated: bool,
}

/// The label the DaemonSet controller puts on its pods: the DaemonSet's generation when the pod
/// was made (so a pod of the current template carries the DaemonSet's `metadata.generation`).
pub const TEMPLATE_GENERATION_LABEL: &str = "pod-template-generation";

/// The rollout state of `ds`.
pub fn rollout(ds: &DaemonSet) -> Rollout {
    let status = ds.status.clone().unwrap_or_default();
    let desired = status.desired_number_scheduled;
    let on_delete = ds
        .spec
        .as_ref()
        .and_then(|s| s.update_strategy.as_ref())
        .and_then(|u| u.type_.as_deref())
        == Some("OnDelete");
    let observed = status.observed_generation.unwrap_or(0) >= ds.metadata.generation.unwrap_or(0);
    let unavailable = status.number_unavailable.unwrap_or(0);
    let updated = status.updated_number_scheduled.unwrap_or(0);
    let outdated = if on_delete && observed {
        (desired - updated).max(0)
    } else {
        0
    };
    let (ready, is_ready, but_outdated) = if on_delete {
        let but_outdated = observed && status.number_ready == desired && unavailable == 0;
        (
            status.number_ready,
            but_outdated && outdated == 0,
            but_outdated,
        )
    } else {
        let available = status.number_available.unwrap_or(0);
        let is_ready = observed && updated == desired && available == desired && unavailable == 0;
        (available, is_ready, is_ready)
    };
    Rollout {
        desired,
        ready,
        outdated,
        is_ready: observed && (desired == 0 || is_ready),
        is_ready_but_outdated: observed && (desired == 0 || but_outdated),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::{DaemonSetSpec, DaemonSetStatus, DaemonSetUpdateStrategy};

    use super::*;

    fn ds(strategy: &str, generation: i64, status: DaemonSetStatus) -> DaemonSet {
        let mut ds = DaemonSet {
            spec: Some(DaemonSetSpec {
                update_strategy: Some(DaemonSetUpdateStrategy {
                    type_: Some(strategy.into()),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            status: Some(status),
            ..Default::default()
        };
        ds.metadata.generation = Some(generation);
        ds
    }

    fn status(
        desired: i32,
        updated: i32,
        available: i32,
        ready: i32,
        observed: i64,
    ) -> DaemonSetStatus {
        DaemonSetStatus {
            desired_number_scheduled: desired,
            updated_number_scheduled: Some(updated),
            number_available: Some(available),
            number_ready: ready,
            number_unavailable: Some(desired - available),
            observed_generation: Some(observed),
            ..Default::default()
        }
    }

    #[test]
    fn zero_desired_is_ready() {
        assert!(rollout(&ds("RollingUpdate", 1, status(0, 0, 0, 0, 1))).is_ready);
    }

    #[test]
    fn a_daemonset_not_yet_counted_is_not_ready() {
        let fresh = DaemonSet {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                generation: Some(1),
                ..Default::default()
            },
            ..Default::default()
        };
        assert!(!rollout(&fresh).is_ready, "no status yet");
        assert!(
            !rollout(&ds("OnDelete", 1, status(0, 0, 0, 0, 0))).is_ready,
            "zero desired, but generation 1 not observed"
        );
    }

    #[test]
    fn rolling_update_needs_all_updated_and_available_for_this_generation() {
        assert!(rollout(&ds("RollingUpdate", 2, status(3, 3, 3, 3, 2))).is_ready);
        assert!(
            !rollout(&ds("RollingUpdate", 2, status(3, 2, 3, 3, 2))).is_ready,
            "one pod not updated"
        );
        assert!(
            !rollout(&ds("RollingUpdate", 2, status(3, 3, 2, 2, 2))).is_ready,
            "one pod unavailable"
        );
        assert!(
            !rollout(&ds("RollingUpdate", 3, status(3, 3, 3, 3, 2))).is_ready,
            "new generation not observed"
        );
    }

    #[test]
    fn on_delete_needs_every_pod_ready() {
        assert!(rollout(&ds("OnDelete", 1, status(2, 2, 2, 2, 1))).is_ready);
        let partial = rollout(&ds("OnDelete", 1, status(2, 0, 1, 1, 1)));
        assert_eq!(
            (partial.desired, partial.ready, partial.is_ready),
            (2, 1, false)
        );
    }

    #[test]
    fn on_delete_pods_of_an_old_revision_are_not_ready_and_counted() {
        // Two of three nodes still run the pod of the previous template: all ready, not updated.
        let old = rollout(&ds("OnDelete", 2, status(3, 1, 3, 3, 2)));
        assert_eq!(
            (old.desired, old.ready, old.outdated, old.is_ready),
            (3, 3, 2, false)
        );
        let current = rollout(&ds("OnDelete", 2, status(3, 3, 3, 3, 2)));
        assert_eq!((current.outdated, current.is_ready), (0, true));
        // RollingUpdate reports no outdated pods of its own (it replaces them itself).
        assert_eq!(
            rollout(&ds("RollingUpdate", 2, status(3, 1, 3, 3, 2))).outdated,
            0
        );
    }
}
