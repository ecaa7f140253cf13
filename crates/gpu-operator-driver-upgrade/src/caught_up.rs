//! Whether the driver reconciler has acted on the ClusterPolicy's current generation. After a
//! spec change (a `driver.version` bump) the driver DaemonSets still hold the previous template
//! until that reconciler applied the new one; an upgrade pass run in between would judge every
//! node against the old template, find them all current and report the upgrade done. The driver
//! reconciler acknowledges a generation in its `DriverReady` condition (`observedGeneration`) once
//! it applied it, so a pass waits for that: the condition as written, or as it waits in the
//! status batch (which in turn waits for this reconciler's own acknowledgement, so the change is
//! recorded in one request).

use gpu_operator_api::{ClusterPolicy, conditions::operand::DRIVER_READY};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

/// Whether `policy`'s `DriverReady` condition acknowledges its current generation, live or as
/// `submitted` (the one waiting in the status batch, if any).
pub fn driver_caught_up(policy: &ClusterPolicy, submitted: Option<&Condition>) -> bool {
    let generation = policy.metadata.generation;
    let live = policy
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == DRIVER_READY));
    [live, submitted]
        .into_iter()
        .flatten()
        .any(|c| c.observed_generation == generation)
}

#[cfg(test)]
mod tests {
    use gpu_operator_api::{ClusterPolicySpec, ClusterPolicyStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

    use super::*;

    fn policy(generation: i64, driver_ready_at: Option<i64>) -> ClusterPolicy {
        let mut policy = ClusterPolicy::new("cluster-policy", ClusterPolicySpec::default());
        policy.metadata.generation = Some(generation);
        policy.status = Some(ClusterPolicyStatus {
            conditions: Some(
                driver_ready_at
                    .map(|at| Condition {
                        type_: DRIVER_READY.to_owned(),
                        status: "True".to_owned(),
                        reason: "Ready".to_owned(),
                        message: String::new(),
                        observed_generation: Some(at),
                        last_transition_time: Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
                    })
                    .into_iter()
                    .collect(),
            ),
            ..ClusterPolicyStatus::default()
        });
        policy
    }

    #[test]
    fn a_pass_waits_until_the_driver_reconciler_acknowledged_the_generation() {
        assert!(driver_caught_up(&policy(2, Some(2)), None));
        assert!(
            !driver_caught_up(&policy(3, Some(2)), None),
            "a driver.version bump not applied yet"
        );
        assert!(
            !driver_caught_up(&policy(1, None), None),
            "no DriverReady yet"
        );
        let submitted = policy(3, Some(3));
        let waiting = submitted
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.first());
        assert!(
            driver_caught_up(&policy(3, Some(2)), waiting),
            "applied, its acknowledgement waiting in the status batch"
        );
    }
}
