//! Whether the driver reconciler has acted on the ClusterPolicy's current generation. After a
//! spec change (a `driver.version` bump) the driver DaemonSets still hold the previous template
//! until that reconciler applied the new one; an upgrade pass run in between would judge every
//! node against the old template, find them all current and report the upgrade done. The driver
//! reconciler acknowledges a generation in its `DriverReady` condition (`observedGeneration`) once
//! it applied it, so a pass waits for that.

use gpu_operator_api::{ClusterPolicy, conditions::operand::DRIVER_READY};

/// Whether `policy`'s `DriverReady` condition acknowledges its current generation.
pub fn driver_caught_up(policy: &ClusterPolicy) -> bool {
    let generation = policy.metadata.generation;
    policy
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == DRIVER_READY))
        .is_some_and(|c| c.observed_generation == generation)
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
        assert!(driver_caught_up(&policy(2, Some(2))));
        assert!(
            !driver_caught_up(&policy(3, Some(2))),
            "a driver.version bump not applied yet"
        );
        assert!(!driver_caught_up(&policy(1, None)), "no DriverReady yet");
    }
}
