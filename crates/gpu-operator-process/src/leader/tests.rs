//! Unit tests of the pure leader-election decisions: may I take the Lease, and what do I write.

use super::*;

const SECOND: Duration = Duration::from_secs(1);
const DEFAULT: Duration = Duration::from_secs(15);

fn spec(holder: Option<&str>, duration: Option<i32>) -> LeaseSpec {
    LeaseSpec {
        holder_identity: holder.map(str::to_owned),
        lease_duration_seconds: duration,
        ..LeaseSpec::default()
    }
}

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(seconds).unwrap()
}

#[test]
fn absent_or_empty_holder_is_free() {
    assert_eq!(assess(None, "me", Duration::ZERO, DEFAULT), Claim::Free);
    assert_eq!(
        assess(Some(&spec(None, Some(15))), "me", Duration::ZERO, DEFAULT),
        Claim::Free
    );
    assert_eq!(
        assess(
            Some(&spec(Some(""), Some(15))),
            "me",
            Duration::ZERO,
            DEFAULT
        ),
        Claim::Free
    );
    assert!(Claim::Free.may_take());
}

#[test]
fn held_by_me_is_mine_even_when_old() {
    let claim = assess(
        Some(&spec(Some("me"), Some(15))),
        "me",
        100 * SECOND,
        DEFAULT,
    );
    assert_eq!(claim, Claim::Mine);
    assert!(claim.may_take());
}

#[test]
fn held_by_another_until_unchanged_for_its_duration() {
    let lease = spec(Some("other"), Some(15));
    let claim = assess(Some(&lease), "me", 10 * SECOND, DEFAULT);
    assert_eq!(
        claim,
        Claim::Held {
            holder: "other".into(),
            remaining: 5 * SECOND
        }
    );
    assert!(!claim.may_take());
    let claim = assess(Some(&lease), "me", 15 * SECOND, DEFAULT);
    assert_eq!(
        claim,
        Claim::Expired {
            holder: "other".into()
        }
    );
    assert!(claim.may_take());
    assert!(assess(Some(&lease), "me", 60 * SECOND, DEFAULT).may_take());
}

#[test]
fn missing_or_negative_duration_uses_the_default() {
    let claim = assess(Some(&spec(Some("other"), None)), "me", 14 * SECOND, DEFAULT);
    assert_eq!(
        claim,
        Claim::Held {
            holder: "other".into(),
            remaining: SECOND
        }
    );
    let claim = assess(
        Some(&spec(Some("other"), Some(-3))),
        "me",
        16 * SECOND,
        DEFAULT,
    );
    assert_eq!(
        claim,
        Claim::Expired {
            holder: "other".into()
        }
    );
    // A zero-second Lease (what a release may leave) is expired at once.
    assert!(
        assess(
            Some(&spec(Some("other"), Some(0))),
            "me",
            Duration::ZERO,
            DEFAULT
        )
        .may_take()
    );
}

#[test]
fn claiming_a_free_lease_starts_it() {
    let params = LeaseParams::default();
    let claimed = claimed_spec(None, "me", &params, at(100));
    assert_eq!(claimed.holder_identity.as_deref(), Some("me"));
    assert_eq!(claimed.lease_duration_seconds, Some(15));
    assert_eq!(claimed.acquire_time, Some(MicroTime(at(100))));
    assert_eq!(claimed.renew_time, Some(MicroTime(at(100))));
    assert_eq!(claimed.lease_transitions, Some(0));

    // Free after a release: a new holder, so a transition, as client-go counts it.
    let released = LeaseSpec {
        lease_transitions: Some(4),
        ..spec(None, Some(15))
    };
    assert_eq!(
        claimed_spec(Some(&released), "me", &params, at(100)).lease_transitions,
        Some(5)
    );
}

#[test]
fn renewing_keeps_acquire_time_and_transitions() {
    let params = LeaseParams::default();
    let first = claimed_spec(None, "me", &params, at(100));
    let renewed = claimed_spec(Some(&first), "me", &params, at(102));
    assert_eq!(renewed.acquire_time, Some(MicroTime(at(100))));
    assert_eq!(renewed.renew_time, Some(MicroTime(at(102))));
    assert_eq!(renewed.lease_transitions, Some(0));
}

#[test]
fn taking_over_counts_a_transition_and_keeps_other_fields() {
    let params = LeaseParams::default();
    let theirs = LeaseSpec {
        lease_transitions: Some(2),
        preferred_holder: Some("someone".into()),
        ..claimed_spec(None, "other", &params, at(50))
    };
    let ours = claimed_spec(Some(&theirs), "me", &params, at(100));
    assert_eq!(ours.holder_identity.as_deref(), Some("me"));
    assert_eq!(ours.acquire_time, Some(MicroTime(at(100))));
    assert_eq!(ours.lease_transitions, Some(3));
    assert_eq!(ours.preferred_holder.as_deref(), Some("someone"));
}

#[test]
fn params_default_to_controller_runtime_and_are_checked() {
    let params = LeaseParams::default();
    assert_eq!(
        (
            params.lease_duration,
            params.renew_deadline,
            params.retry_period
        ),
        (15 * SECOND, 10 * SECOND, 2 * SECOND)
    );
    params.validate().unwrap();
    let nvidia = LeaseParams::with_renew_deadline(20 * SECOND);
    assert_eq!(nvidia.lease_duration, 25 * SECOND);
    nvidia.validate().unwrap();
    for bad in [
        LeaseParams {
            renew_deadline: 15 * SECOND,
            ..params
        },
        LeaseParams {
            retry_period: 10 * SECOND,
            ..params
        },
        LeaseParams {
            retry_period: Duration::ZERO,
            ..params
        },
    ] {
        let error = bad.validate().unwrap_err().to_string();
        assert!(error.contains("lease duration"), "{error}");
    }
}

#[test]
fn lease_name_is_nvidias() {
    assert_eq!(DEFAULT_LEASE_NAME, "53822513.nvidia.com");
}
