//! `helm install` of our chart with our image, on the real node: the operator Deployment's pod
//! runs there under the chart's ServiceAccount, RBAC and securityContext; it talks to the API
//! server through in-cluster configuration (the `kubernetes` Service), passes its probes, takes
//! the leader Lease and gets the chart's ClusterPolicy ready for the kwok fleet. With two
//! replicas, deleting the leader's pod hands the Lease to the other; the test prints how many
//! seconds that took.
//!
//! Pod Security as NVIDIA's chart has it: the namespace enforces `restricted` when the release is
//! installed, so the operator pod is admitted only because it meets `restricted`; the chart's
//! node-discovery DaemonSet (host paths) is refused at first, until the operator, with
//! `psa.enabled=true`, labels its namespace `privileged` as NVIDIA's operator does.
#![cfg(feature = "real-node")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use gpu_operator_e2e::real_node_pods as support;

use std::time::{Duration, Instant};

use gpu_operator_api::ClusterPolicy;
use gpu_operator_harness::{
    access::kubectl_ok,
    chart::{chart_dir, helm_ok},
    crd::ensure_crd,
    real_node::{NODE_NAME, TAINT},
};
use gpu_operator_process::leader::DEFAULT_LEASE_NAME;
use k8s_openapi::api::{
    coordination::v1::Lease,
    core::v1::{Event, Namespace, Pod},
};
use kube::{
    Api,
    api::{DeleteParams, ListParams},
};
use serde_json::json;
use support::TestNamespace;

/// The chart's ClusterPolicy.
const POLICY: &str = "cluster-policy";

/// The operator pods (Running and Ready) on the real node, by name.
async fn ready_operator_pods(pods: &Api<Pod>) -> anyhow::Result<Vec<String>> {
    let list = pods
        .list(&ListParams::default().labels("app.kubernetes.io/component=gpu-operator"))
        .await?;
    Ok(list
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(NODE_NAME))
        .filter(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .filter_map(|p| p.metadata.name)
        .collect())
}

/// The objects (kind, name) whose pods Pod Security refused in `namespace`, with the message.
async fn refused_by_pod_security(
    client: &kube::Client,
    namespace: &str,
) -> Vec<(String, String, String)> {
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    events
        .list(&ListParams::default().fields("reason=FailedCreate"))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|e| {
            let message = e.message?;
            message.contains("violates PodSecurity").then(|| {
                let object = e.involved_object;
                (
                    object.kind.unwrap_or_default(),
                    object.name.unwrap_or_default(),
                    message,
                )
            })
        })
        .collect()
}

/// A Helm release (named as its namespace), uninstalled by [`Release::uninstall`] or on drop.
struct Release(Option<String>);

impl Release {
    fn uninstall(&mut self) -> anyhow::Result<String> {
        let Some(release) = self.0.take() else {
            return Ok(String::new());
        };
        helm_ok(&[
            "uninstall",
            &release,
            "-n",
            &release,
            "--wait",
            "--timeout",
            "3m",
        ])
    }
}

impl Drop for Release {
    fn drop(&mut self) {
        if let Err(error) = self.uninstall() {
            eprintln!("uninstalling the release: {error}");
        }
    }
}

/// The real node cordoned while this lives (uncordoned on drop, a failed test included).
struct Cordoned;

impl Cordoned {
    fn new() -> Self {
        kubectl_ok(&["cordon", NODE_NAME]).unwrap();
        Self
    }
}

impl Drop for Cordoned {
    fn drop(&mut self) {
        if let Err(error) = kubectl_ok(&["uncordon", NODE_NAME]) {
            eprintln!("uncordoning {NODE_NAME}: {error}");
        }
    }
}

async fn holder(leases: &Api<Lease>) -> Option<String> {
    leases
        .get_opt(DEFAULT_LEASE_NAME)
        .await
        .ok()
        .flatten()
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
}

#[tokio::test]
#[allow(clippy::too_many_lines, reason = "one scenario, step by step")]
async fn the_chart_runs_our_image_on_the_real_node_and_a_second_replica_takes_over() {
    ensure_crd().await.unwrap();
    // The namespace enforces the restricted Pod Security Standard before anything is installed;
    // the release is named after it (its name holds the chart's name, so objects are too).
    let ns = TestNamespace::with_labels(
        "gpu-operator-real",
        json!({
            "pod-security.kubernetes.io/enforce": "restricted",
            "pod-security.kubernetes.io/warn": "restricted",
        }),
    )
    .await;
    let client = ns.client.clone();
    let release = ns.name.clone();
    let tolerations = json!([{"key": TAINT.0, "operator": "Exists"}]).to_string();
    let node_selector = json!({"kubernetes.io/hostname": NODE_NAME}).to_string();
    let chart = chart_dir();
    let started = Instant::now();
    let installed = helm_ok(&[
        "install",
        &release,
        chart.to_str().unwrap(),
        "-n",
        &release,
        "--set",
        "operator.imagePullPolicy=Never",
        "--set",
        "psa.enabled=true",
        "--set-json",
        &format!("operator.tolerations={tolerations}"),
        "--set-json",
        &format!("operator.nodeSelector={node_selector}"),
        "--wait",
        "--timeout",
        "5m",
    ]);
    // Uninstalled on drop too: a failed test leaves no ClusterPolicy for the next test binary.
    let mut release_guard = Release(Some(release.clone()));
    if let Err(error) = installed {
        panic!("{error}\n{}", ns.describe());
    }
    eprintln!("helm install --wait took {:.0?}", started.elapsed());

    // Pod Security: restricted was enforced when the release went in (the node-discovery
    // DaemonSet's host-path pods were refused), so the operator pod, created then, meets it; the
    // operator then labelled its namespace as NVIDIA's does, and node discovery runs.
    let refused = refused_by_pod_security(&client, &release).await;
    assert!(
        refused
            .iter()
            .any(|(kind, name, _)| kind == "DaemonSet" && name.ends_with("node-discovery")),
        "no pod of node discovery refused while `restricted` was enforced: {refused:?}"
    );
    assert!(
        refused.iter().all(|(kind, _, _)| kind == "DaemonSet"),
        "the operator's own pod was refused by `restricted`: {refused:?}"
    );
    let labels = Api::<Namespace>::all(client.clone())
        .get(&release)
        .await
        .unwrap()
        .metadata
        .labels
        .unwrap_or_default();
    for level in ["enforce", "audit", "warn"] {
        let key = format!("pod-security.kubernetes.io/{level}");
        assert_eq!(
            labels.get(&key).map(String::as_str),
            Some("privileged"),
            "psa.enabled: {key} of namespace {release}: {labels:?}"
        );
    }

    // The pod on the real node is Ready (its readiness probe passed) and holds the Lease.
    let pods: Api<Pod> = Api::namespaced(client.clone(), &release);
    let leases: Api<Lease> = Api::namespaced(client.clone(), &release);
    let first = ns
        .wait(
            "the operator pod to be Ready on the real node",
            Duration::from_secs(120),
            || async { Ok(ready_operator_pods(&pods).await?.into_iter().next()) },
        )
        .await;
    ns.wait(
        "the operator pod to take the Lease",
        Duration::from_secs(60),
        || async { Ok(holder(&leases).await.filter(|h| h.starts_with(&first))) },
    )
    .await;
    let policies: Api<ClusterPolicy> = Api::all(client.clone());
    ns.wait(
        "the chart's ClusterPolicy to be ready",
        Duration::from_secs(180),
        || async {
            let policy = policies.get_opt(POLICY).await?;
            Ok(policy
                .and_then(|p| p.status)
                .filter(|s| format!("{:?}", s.state) == "Ready")
                .map(|_| ()))
        },
    )
    .await;

    // Two replicas: the second waits; the leader's pod deleted, the second takes over.
    let deployment = kubectl_ok(&["get", "deployment", "-n", &release, "-o", "name"]).unwrap();
    kubectl_ok(&["scale", "-n", &release, deployment.trim(), "--replicas=2"]).unwrap();
    let both = ns
        .wait(
            "two Ready operator pods",
            Duration::from_secs(120),
            || async {
                let ready = ready_operator_pods(&pods).await?;
                Ok((ready.len() == 2).then_some(ready))
            },
        )
        .await;
    let leader = holder(&leases).await.unwrap();
    let leader_pod = both
        .iter()
        .find(|p| leader.starts_with(p.as_str()))
        .unwrap()
        .clone();
    let other = both.iter().find(|p| **p != leader_pod).unwrap().clone();
    // The Deployment replaces the deleted pod at once, and a fresh pod may win the Lease before
    // the standby's next try (seen on the real node); with the node cordoned the replacement
    // stays Pending, so a new holder can only be the standby.
    let cordoned = Cordoned::new();
    let deleted = Instant::now();
    pods.delete(&leader_pod, &DeleteParams::default())
        .await
        .unwrap();
    ns.wait(
        "the other replica to take the Lease",
        Duration::from_secs(120),
        || async { Ok(holder(&leases).await.filter(|h| h.starts_with(&other))) },
    )
    .await;
    eprintln!(
        "leader failover on the real node: {:.1} s from deleting the leader's pod",
        deleted.elapsed().as_secs_f64()
    );
    drop(cordoned);

    release_guard.uninstall().unwrap();
    ns.delete().await;
}
