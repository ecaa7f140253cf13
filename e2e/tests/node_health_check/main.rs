//! The GPU health signal acted on by the real engine: medik8s Node Health Check (built from its
//! Go module, run as a host process) watches four simulated GPU nodes, each with the real health
//! agent (`gpu-operator-validator health`, a host process): three on the fake NVML library, the
//! fourth on a library that cannot be loaded (`GPUHealthy=Unknown`, `HealthUnknown`), through the
//! NodeHealthCheck the chart ships as an example (`healthCheck.nodeHealthCheck.enabled=true`,
//! its selector narrowed to this test's nodes and its duration to seconds). While every GPU is
//! healthy NHC creates no remediation object; a double-bit ECC error below the NVML boundary on
//! node A makes A's agent write `GPUHealthy=False` and NHC create Self Node Remediation's object
//! for exactly A, and nothing for the node whose health is unknown (the chart does not remediate
//! `Unknown`); a second faulty node would leave fewer healthy nodes than `minHealthy` ("51%" of 4
//! is 3), so NHC skips it and says so; when the faults clear, the agents set `GPUHealthy=True`
//! again and NHC deletes A's remediation.
#![cfg(feature = "e2e")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod engine;

use std::time::Duration;

use gpu_operator_e2e::fake_nvml::Agent;
use gpu_operator_harness::{
    access::{kubeconfig_path, kubectl_ok},
    chart::{kubectl_apply, render},
    client,
    fleet::Profile,
    unique_name, wait_until,
};
use k8s_openapi::api::core::v1::{Event, Namespace, Node};
use kube::{
    Api, ResourceExt,
    api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams},
};
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(60);
/// The label that puts a node in this run's NodeHealthCheck.
const RUN_LABEL: &str = "gpu-operator.e2e/node-health-check";
/// The agents poll every second, so a fault shows within a couple.
const POLL_SECONDS: u32 = 1;

/// Deletes the test's nodes, namespace, the NodeHealthCheck and the CRDs when dropped.
struct Cleanup {
    nodes: Vec<String>,
    namespace: String,
    nhc: String,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = kubectl_ok(&["delete", "nodehealthcheck", &self.nhc, "--ignore-not-found"]);
        for node in &self.nodes {
            let _ = kubectl_ok(&["delete", "node", node, "--ignore-not-found"]);
        }
        for (kind, name) in [
            ("namespace", self.namespace.as_str()),
            ("namespace", "medik8s-leases"),
            ("clusterrole", "node-healthcheck-operator-aggregation"),
        ] {
            let _ = kubectl_ok(&["delete", kind, name, "--ignore-not-found", "--wait=false"]);
        }
        engine::remove_crds();
    }
}

fn api(group: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, "v1alpha1", kind), plural)
}

/// The GPU node `name` of this run: an H100 node (8 GPUs) with the labels the operator and the
/// test give it.
async fn create_node(nodes: &Api<Node>, name: &str, run: &str) {
    let mut node = Profile::H100.node(name);
    let labels = node.metadata.labels.get_or_insert_default();
    labels.insert("nvidia.com/gpu.present".into(), "true".into());
    labels.insert(RUN_LABEL.into(), run.into());
    nodes.create(&PostParams::default(), &node).await.unwrap();
}

/// The status of condition `type_` on node `name`.
async fn condition(nodes: &Api<Node>, name: &str, type_: &str) -> Option<(String, String)> {
    let node = nodes.get(name).await.unwrap();
    node.status?
        .conditions?
        .into_iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status, c.reason.unwrap_or_default()))
}

async fn wait_condition(nodes: &Api<Node>, name: &str, status: &str, agent: &Agent) {
    let what = format!("GPUHealthy={status} on {name}");
    let seen = wait_until(&what, TIMEOUT, || async {
        Ok(condition(nodes, name, "GPUHealthy")
            .await
            .filter(|(s, _)| s == status))
    })
    .await;
    assert!(
        seen.is_ok(),
        "{what}: {seen:?}\nagent log:\n{}",
        agent.log()
    );
}

/// The names of the nodes the remediation objects in the namespace are for.
async fn remediated(remediations: &Api<DynamicObject>) -> Vec<String> {
    let mut nodes: Vec<String> = remediations
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter(|r| r.metadata.deletion_timestamp.is_none())
        .map(ResourceExt::name_any)
        .collect();
    nodes.sort();
    nodes
}

/// The NodeHealthCheck's status.
async fn nhc_status(checks: &Api<DynamicObject>, name: &str) -> Value {
    checks
        .get(name)
        .await
        .map_or(Value::Null, |o| o.data["status"].clone())
}

/// Waits until the NodeHealthCheck's status satisfies `check`; returns it.
async fn wait_status(
    checks: &Api<DynamicObject>,
    name: &str,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    let waited = wait_until(what, TIMEOUT, || async {
        let status = nhc_status(checks, name).await;
        Ok(check(&status).then_some(status))
    })
    .await;
    match waited {
        Ok(status) => status,
        Err(e) => panic!(
            "{e}; NodeHealthCheck status: {:#}",
            nhc_status(checks, name).await
        ),
    }
}

fn unhealthy_nodes(status: &Value) -> Vec<String> {
    let mut nodes: Vec<String> = status["unhealthyNodes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| n["name"].as_str().map(str::to_owned))
        .collect();
    nodes.sort();
    nodes
}

#[tokio::test]
#[allow(clippy::too_many_lines, reason = "one scenario, step by step")]
async fn node_health_check_remediates_exactly_the_faulty_gpu_node_and_holds_min_healthy() {
    let nhc_dir = engine::nhc_dir();
    let client = client().await.unwrap();
    let run = unique_name("nhc");
    let namespace = run.clone();
    let nodes: Api<Node> = Api::all(client.clone());
    let names: Vec<String> = ["a", "b", "c", "unknown"]
        .iter()
        .map(|s| format!("{run}-{s}"))
        .collect();
    let nhc_name = format!("{run}-gpu-health");
    let _cleanup = Cleanup {
        nodes: names.clone(),
        namespace: namespace.clone(),
        nhc: nhc_name.clone(),
    };
    let dir = tempfile::tempdir().unwrap();

    // The engine's and the remediator's API, the template the NodeHealthCheck names.
    engine::install_crds(&nhc_dir);
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": namespace}})).unwrap(),
        )
        .await
        .unwrap();
    let template = "self-node-remediation-automatic-strategy-template";
    kubectl_apply(&engine::snr_template(template, &namespace)).unwrap();

    // Three GPU nodes with their health agents on the fake NVML library, all healthy; a fourth
    // whose agent cannot load NVML.
    let kubeconfig = kubeconfig_path().unwrap();
    let mut agents = Vec::new();
    for name in &names {
        create_node(&nodes, name, &run).await;
        agents.push(if name.ends_with("-unknown") {
            Agent::start_without_nvml(name, POLL_SECONDS, &kubeconfig, dir.path())
        } else {
            Agent::start(
                name,
                Profile::H100.gpu_count(),
                POLL_SECONDS,
                &kubeconfig,
                dir.path(),
            )
        });
    }
    for (name, agent) in names.iter().zip(&agents).take(3) {
        wait_condition(&nodes, name, "True", agent).await;
    }
    wait_condition(&nodes, &names[3], "Unknown", &agents[3]).await;
    assert_eq!(
        condition(&nodes, &names[3], "GPUHealthy").await.unwrap().1,
        "HealthUnknown"
    );

    // The chart's example NodeHealthCheck, narrowed to this run's nodes and to seconds.
    let selector = json!({"matchLabels": {"nvidia.com/gpu.present": "true", RUN_LABEL: run}});
    let conditions = json!([{"type": "GPUHealthy", "status": "False", "duration": "2s"}]);
    let rendered = render(
        "gpu-operator",
        &namespace,
        &["templates/node-health-check.yaml"],
        &[
            "--set",
            "healthCheck.nodeHealthCheck.enabled=true",
            "--set",
            &format!("healthCheck.nodeHealthCheck.name={nhc_name}"),
            "--set",
            &format!("healthCheck.nodeHealthCheck.remediationTemplate.namespace={namespace}"),
            "--set-json",
            &format!("healthCheck.nodeHealthCheck.selector={selector}"),
            "--set-json",
            &format!("healthCheck.nodeHealthCheck.unhealthyConditions={conditions}"),
        ],
    )
    .unwrap();
    assert!(
        rendered.contains("minHealthy: \"51%\"") && rendered.contains(template),
        "the chart's defaults stay: {rendered}"
    );
    kubectl_apply(&rendered).unwrap();
    let _engine = engine::start(&nhc_dir, &namespace, dir.path());
    let nhc_log = || std::fs::read_to_string(dir.path().join("nhc.log")).unwrap_or_default();

    let checks: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &api(
            "remediation.medik8s.io",
            "NodeHealthCheck",
            "nodehealthchecks",
        ),
    );
    let remediations: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &namespace,
        &api(
            engine::SNR_GROUP,
            "SelfNodeRemediation",
            "selfnoderemediations",
        ),
    );

    // Healthy or unknown: NHC has seen the four nodes healthy and created nothing.
    wait_status(&checks, &nhc_name, "NHC to see 4 healthy nodes", |s| {
        s["observedNodes"] == 4 && s["healthyNodes"] == 4
    })
    .await;
    assert_eq!(remediated(&remediations).await, Vec::<String>::new());

    // A double-bit ECC error on node A's GPU 0: the agent reports it, NHC remediates A alone.
    agents[0].double_bit_ecc();
    wait_condition(&nodes, &names[0], "False", &agents[0]).await;
    assert_eq!(
        condition(&nodes, &names[0], "GPUHealthy").await.unwrap().1,
        "DoubleBitECC"
    );
    let created = wait_until("NHC to remediate node A", TIMEOUT, || async {
        let now = remediated(&remediations).await;
        Ok((!now.is_empty()).then_some(now))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\nNHC log:\n{}", nhc_log()));
    assert_eq!(
        created,
        vec![names[0].clone()],
        "exactly node A: nothing for the healthy nodes nor the one whose health is unknown"
    );
    let remediation = remediations.get(&names[0]).await.unwrap();
    assert_eq!(
        remediation.data["spec"]["remediationStrategy"], "Automatic",
        "the template's spec"
    );
    let owner = &remediation.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("NodeHealthCheck", nhc_name.as_str())
    );
    for (name, status) in names[1..].iter().zip(["True", "True", "Unknown"]) {
        assert_eq!(
            condition(&nodes, name, "GPUHealthy").await.unwrap().0,
            status
        );
    }

    // Node B fails too: only C and the unknown node would stay healthy, fewer than minHealthy
    // (51% of 4, rounded up: 3), so NHC marks B unhealthy and skips its remediation, with a
    // Warning Event saying why.
    agents[1].double_bit_ecc();
    wait_condition(&nodes, &names[1], "False", &agents[1]).await;
    let status = wait_status(&checks, &nhc_name, "NHC to see node B unhealthy", |s| {
        unhealthy_nodes(s) == [names[0].clone(), names[1].clone()]
    })
    .await;
    assert_eq!(status["healthyNodes"], 2, "{status:#}");
    let events: Api<Event> = Api::all(client.clone());
    let skipped = wait_until("NHC's RemediationSkipped Event", TIMEOUT, || async {
        let list = events
            .list(&ListParams::default().fields(&format!("involvedObject.name={nhc_name}")))
            .await?;
        Ok(list.items.into_iter().find(|e| {
            e.reason.as_deref() == Some("RemediationSkipped")
                && e.message
                    .as_deref()
                    .is_some_and(|m| m.contains("is 2 and should equal or exceed 3"))
        }))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\nNHC log:\n{}", nhc_log()));
    assert_eq!(skipped.type_.as_deref(), Some("Warning"));
    assert_eq!(
        remediated(&remediations).await,
        vec![names[0].clone()],
        "no remediation for node B while minHealthy does not hold"
    );

    // The faults clear (a GPU reset): the agents report healthy again, NHC deletes A's
    // remediation and counts all four healthy; B was never remediated.
    agents[0].healthy();
    agents[1].healthy();
    wait_condition(&nodes, &names[0], "True", &agents[0]).await;
    wait_condition(&nodes, &names[1], "True", &agents[1]).await;
    wait_status(
        &checks,
        &nhc_name,
        "NHC to see 4 healthy nodes again",
        |s| s["healthyNodes"] == 4 && unhealthy_nodes(s).is_empty(),
    )
    .await;
    wait_until("A's remediation to be deleted", TIMEOUT, || async {
        Ok(remediations
            .list(&ListParams::default())
            .await?
            .items
            .is_empty()
            .then_some(()))
    })
    .await
    .unwrap();
}
