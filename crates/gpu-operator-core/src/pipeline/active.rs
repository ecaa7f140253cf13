//! Which ClusterPolicy is active: the oldest by creation time, then by name. Every other one is
//! ignored (and says so in its status).

use std::sync::Arc;

use gpu_operator_api::ClusterPolicy;
use kube::{Resource as _, ResourceExt as _};

/// The active ClusterPolicy among `policies`, if any.
pub fn active(policies: &[Arc<ClusterPolicy>]) -> Option<Arc<ClusterPolicy>> {
    policies
        .iter()
        .filter(|p| p.meta().deletion_timestamp.is_none())
        .min_by(|a, b| {
            a.creation_timestamp()
                .cmp(&b.creation_timestamp())
                .then_with(|| a.name_any().cmp(&b.name_any()))
        })
        .cloned()
}

/// Whether `policy` is the active one among `policies`.
pub fn is_active(policy: &ClusterPolicy, policies: &[Arc<ClusterPolicy>]) -> bool {
    active(policies).is_some_and(|a| a.name_any() == policy.name_any())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    fn policy(name: &str, created_secs: i64) -> Arc<ClusterPolicy> {
        let mut p = ClusterPolicy::new(name, gpu_operator_api::ClusterPolicySpec::default());
        p.metadata.creation_timestamp = Some(Time(Timestamp::from_second(created_secs).unwrap()));
        Arc::new(p)
    }

    #[test]
    fn the_oldest_wins_then_the_name() {
        let policies = vec![policy("b", 10), policy("a", 20), policy("c", 10)];
        assert_eq!(active(&policies).unwrap().name_any(), "b");
        assert!(is_active(&policies[0], &policies));
        assert!(!is_active(&policies[2], &policies));
        assert!(active(&[]).is_none());
    }
}
