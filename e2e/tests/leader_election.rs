//! Leader election on a real API server: of two candidates exactly one leads; when the leader
//! releases, the standby takes over within a few retry periods (well before the lease would
//! expire); a leader whose Lease is stolen notices; a Lease left behind by a dead holder is taken
//! over once it expires. Every time bound is derived from the lease settings, plus a margin for a
//! loaded 2-core machine, and stays below the bound that would make the check meaningless.
#![cfg(feature = "e2e")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use gpu_operator_harness::{access::kubectl_ok, client, unique_name, wait_until};
use gpu_operator_process::leader::{self, Leadership, LeaseParams, Lost};
use k8s_openapi::api::{
    coordination::v1::{Lease, LeaseSpec},
    core::v1::Namespace,
};
use kube::{
    Api,
    api::{ObjectMeta, PostParams},
};
use tokio::task::JoinHandle;

/// About half the defaults (15 s, 10 s, 2 s) so the test runs in seconds, with room between a
/// hand-over after a release (a retry period) and one after expiry (a lease duration).
const PARAMS: LeaseParams = LeaseParams {
    lease_duration: Duration::from_secs(8),
    renew_deadline: Duration::from_secs(6),
    retry_period: Duration::from_secs(1),
};

/// Added to every upper bound: on a loaded 2-core machine a tokio timer or an API request can be
/// seconds late.
const LOADED_MACHINE_MARGIN: Duration = Duration::from_secs(3);

/// How long something promised within `promised` may take here.
const fn bound(promised: Duration) -> Duration {
    promised.saturating_add(LOADED_MACHINE_MARGIN)
}

/// A namespace of the test's own, deleted when dropped (also when the test fails).
struct TestNamespace(String);

impl TestNamespace {
    async fn create(client: &kube::Client) -> Self {
        let name = unique_name("leader-election");
        let namespace = Namespace {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .unwrap();
        Self(name)
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        let _ = kubectl_ok(&[
            "delete",
            "namespace",
            &self.0,
            "--ignore-not-found",
            "--wait=false",
        ]);
    }
}

fn candidate(
    client: &kube::Client,
    namespace: &str,
    lease: &str,
    identity: &str,
) -> JoinHandle<Leadership> {
    let (client, namespace, lease, identity) = (
        client.clone(),
        namespace.to_owned(),
        lease.to_owned(),
        identity.to_owned(),
    );
    tokio::spawn(async move {
        leader::acquire(
            client,
            &namespace,
            &lease,
            &identity,
            PARAMS,
            leader::Fence::closed(),
        )
        .await
        .unwrap()
    })
}

async fn holder(api: &Api<Lease>, lease: &str) -> Option<String> {
    api.get(lease)
        .await
        .unwrap()
        .spec
        .and_then(|spec| spec.holder_identity)
}

#[tokio::test]
async fn one_leader_handover_on_release_and_stolen_lease_is_noticed() {
    let client = client().await.unwrap();
    let namespace = TestNamespace::create(&client).await;
    let api = Api::<Lease>::namespaced(client.clone(), &namespace.0);
    let lease = "53822513.nvidia.com";

    // Two candidates race for a Lease that does not exist yet: exactly one wins.
    let mut a = candidate(&client, &namespace.0, lease, "candidate-a");
    let mut b = candidate(&client, &namespace.0, lease, "candidate-b");
    // The first attempt on a missing Lease creates it; the loser of the race retries once.
    let first_bound = bound(PARAMS.retry_period * 2);
    let (first, mut standby, standby_name) = tokio::select! {
        first = &mut a => (first.unwrap(), b, "candidate-b"),
        first = &mut b => (first.unwrap(), a, "candidate-a"),
        () = tokio::time::sleep(first_bound) => panic!("nobody became leader within {first_bound:?}"),
    };
    assert!(first.is_leader());
    assert_eq!(holder(&api, lease).await.as_deref(), Some(first.identity()));

    // The standby keeps waiting while the leader renews. The marker: the Lease shows a renewal
    // more than a lease duration after it was acquired, so a standby that ignored renewals would
    // have taken it by then.
    let renewed_past_a_lease_duration = || async {
        let spec = api.get(lease).await?.spec.unwrap_or_default();
        let (Some(acquired), Some(renewed)) = (spec.acquire_time, spec.renew_time) else {
            return Ok(None);
        };
        let held = renewed.0.duration_since(acquired.0);
        Ok(
            (held > k8s_openapi::jiff::SignedDuration::try_from(PARAMS.lease_duration)?)
                .then_some(()),
        )
    };
    wait_until(
        "the leader to renew past a lease duration",
        bound(PARAMS.lease_duration + PARAMS.retry_period * 2),
        renewed_past_a_lease_duration,
    )
    .await
    .unwrap();
    assert!(
        !standby.is_finished(),
        "{standby_name} became leader while {} renewed",
        first.identity()
    );
    assert!(first.is_leader());
    assert_eq!(holder(&api, lease).await.as_deref(), Some(first.identity()));

    // The leader releases: the standby, polling every retry period, takes over within a few of
    // them — sooner than the released Lease could have expired.
    let takeover_bound = bound(PARAMS.retry_period * 2);
    assert!(
        takeover_bound < PARAMS.lease_duration,
        "the bound must tell a hand-over from an expiry"
    );
    let released = Instant::now();
    first.release().await;
    let second = tokio::time::timeout(takeover_bound, &mut standby)
        .await
        .unwrap_or_else(|_| {
            panic!("the standby did not take over within {takeover_bound:?} of the release")
        })
        .unwrap();
    println!(
        "standby took over {:?} after the release",
        released.elapsed()
    );
    assert_eq!(second.identity(), standby_name);
    assert_eq!(holder(&api, lease).await.as_deref(), Some(standby_name));
    let spec = api.get(lease).await.unwrap().spec.unwrap();
    assert_eq!(
        spec.lease_transitions,
        Some(1),
        "a hand-over after a release counts as a transition"
    );

    // Somebody else writes themselves in as holder: the leader notices on its next renewal.
    let mut stolen = api.get(lease).await.unwrap();
    stolen.spec.as_mut().unwrap().holder_identity = Some("intruder".to_owned());
    api.replace(lease, &PostParams::default(), &stolen)
        .await
        .unwrap();
    // It renews every retry period and gives up at the renew deadline at the latest.
    let lost = tokio::time::timeout(bound(PARAMS.renew_deadline), second.lost())
        .await
        .expect("the leader did not notice the stolen lease within the renew deadline");
    assert_eq!(
        lost,
        Lost::Taken {
            holder: "intruder".to_owned()
        }
    );
    assert!(!second.is_leader());
    assert_eq!(
        holder(&api, lease).await.as_deref(),
        Some("intruder"),
        "the old leader wrote again"
    );
}

#[tokio::test]
async fn an_abandoned_lease_is_taken_over_once_it_expires() {
    let client = client().await.unwrap();
    let namespace = TestNamespace::create(&client).await;
    let api = Api::<Lease>::namespaced(client.clone(), &namespace.0);
    let lease = "abandoned";
    let ghost = Lease {
        metadata: ObjectMeta {
            name: Some(lease.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some("ghost".to_owned()),
            lease_duration_seconds: Some(2),
            lease_transitions: Some(1),
            ..LeaseSpec::default()
        }),
    };
    api.create(&PostParams::default(), &ghost).await.unwrap();

    let started = Instant::now();
    let leadership = wait_until(
        "the abandoned lease to be taken over",
        Duration::from_secs(15),
        || {
            let client = client.clone();
            let namespace = namespace.0.clone();
            async move {
                let attempt = leader::acquire(
                    client,
                    &namespace,
                    lease,
                    "heir",
                    PARAMS,
                    leader::Fence::closed(),
                );
                Ok(tokio::time::timeout(Duration::from_secs(10), attempt)
                    .await
                    .ok()
                    .transpose()?)
            }
        },
    )
    .await
    .unwrap();
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(2),
        "took a live-looking lease after {waited:?}"
    );
    assert_eq!(holder(&api, lease).await.as_deref(), Some("heir"));
    let spec = api.get(lease).await.unwrap().spec.unwrap();
    assert_eq!(spec.lease_transitions, Some(2));
    assert_eq!(
        spec.lease_duration_seconds,
        Some(i32::try_from(PARAMS.lease_duration.as_secs()).unwrap())
    );
    leadership.release().await;
    assert_eq!(holder(&api, lease).await, None);
}
