//! Which owners are served. Of a singleton kind ([`Owner::SINGLETON`], ClusterPolicy) the active
//! one is the oldest by creation time, then by name, and every other one is ignored (and says so
//! in its status); of another kind every one not being deleted is.

use std::sync::Arc;

use kube::ResourceExt as _;

use crate::contract::Owner;

/// The active one among `owners` of a singleton kind (the oldest), if any.
pub fn active<K: Owner>(owners: &[Arc<K>]) -> Option<Arc<K>> {
    owners
        .iter()
        .filter(|p| p.meta().deletion_timestamp.is_none())
        .min_by(|a, b| {
            a.creation_timestamp()
                .cmp(&b.creation_timestamp())
                .then_with(|| a.name_any().cmp(&b.name_any()))
        })
        .cloned()
}

/// Whether `owner` is served: the active one among `owners` of a singleton kind, any one not
/// being deleted of another.
pub fn is_active<K: Owner>(owner: &K, owners: &[Arc<K>]) -> bool {
    if K::SINGLETON {
        active(owners).is_some_and(|a| a.name_any() == owner.name_any())
    } else {
        owner.meta().deletion_timestamp.is_none()
    }
}

#[cfg(test)]
mod tests {
    use gpu_operator_api::ClusterPolicy;
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
        assert!(is_active(policies[0].as_ref(), &policies));
        assert!(!is_active(policies[2].as_ref(), &policies));
        assert!(active::<ClusterPolicy>(&[]).is_none());
    }

    #[test]
    fn of_a_kind_that_is_no_singleton_every_one_not_being_deleted_is_served() {
        use crate::pipeline::test_pool::Pool;
        let mut leaving = Pool::new("c", "u3", None);
        leaving.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        let pools = vec![
            Arc::new(Pool::new("b", "u2", None)),
            Arc::new(Pool::new("a", "u1", None)),
            Arc::new(leaving),
        ];
        assert!(is_active(pools[0].as_ref(), &pools));
        assert!(is_active(pools[1].as_ref(), &pools));
        assert!(!is_active(pools[2].as_ref(), &pools));
    }
}
