//! Leader election on a real API server: of two candidates exactly one leads; when the leader
//! releases, the standby takes over within a few seconds; a leader whose Lease is stolen notices;
//! a Lease left behind by a dead holder is taken over once it expires.
#![cfg(feature = "e2e")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use gpu_operator_e2e::{client, harness::kubectl_ok, unique_name, wait_until};
use gpu_operator_runtime::leader::{self, Leadership, LeaseParams, Lost};
use k8s_openapi::api::{
    coordination::v1::{Lease, LeaseSpec},
    core::v1::Namespace,
};
use kube::{
    Api,
    api::{ObjectMeta, PostParams},
};
use tokio::task::JoinHandle;

/// Shorter than the defaults so the test runs in seconds; same proportions.
const PARAMS: LeaseParams = LeaseParams {
    lease_duration: Duration::from_secs(4),
    renew_deadline: Duration::from_secs(3),
    retry_period: Duration::from_millis(500),
};

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
        leader::acquire(client, &namespace, &lease, &identity, PARAMS)
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
    let (first, mut standby, standby_name) = tokio::select! {
        first = &mut a => (first.unwrap(), b, "candidate-b"),
        first = &mut b => (first.unwrap(), a, "candidate-a"),
        () = tokio::time::sleep(Duration::from_secs(10)) => panic!("nobody became leader within 10 s"),
    };
    assert!(first.is_leader());
    assert_eq!(holder(&api, lease).await.as_deref(), Some(first.identity()));

    // The standby keeps waiting for well past a lease duration while the leader renews.
    tokio::time::sleep(PARAMS.lease_duration * 2).await;
    assert!(
        !standby.is_finished(),
        "{standby_name} became leader while {} renewed",
        first.identity()
    );
    assert!(first.is_leader());
    assert_eq!(holder(&api, lease).await.as_deref(), Some(first.identity()));

    // The leader releases: the standby takes over within a few retry periods, not a lease duration.
    let released = Instant::now();
    first.release().await;
    let second = tokio::time::timeout(Duration::from_secs(3), &mut standby)
        .await
        .expect("the standby did not take over within 3 s of the release")
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
    let lost = tokio::time::timeout(PARAMS.renew_deadline, second.lost())
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
                let attempt = leader::acquire(client, &namespace, lease, "heir", PARAMS);
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
    assert_eq!(spec.lease_duration_seconds, Some(4));
    leadership.release().await;
    assert_eq!(holder(&api, lease).await, None);
}
