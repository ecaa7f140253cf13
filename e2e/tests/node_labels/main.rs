//! The node-labelling reconciler against the real API server: GPU nodes get `gpu.present` and
//! their deploy gates (mig-manager only on MIG-capable ones), CPU nodes nothing; values users or
//! operands set are kept; `gpu.deploy.operands=false` and losing the GPU remove the gates; and a
//! converged cluster gets no more patches.
//!
//! Each test runs the reconciler in this process on nodes it creates itself: its node cache
//! watches only nodes carrying the test's run label, so tests in parallel (and the shared fleet)
//! stay out of each other's way. The ClusterPolicy is a cluster-wide singleton (the oldest wins),
//! so every test creates one and asserts only what holds under any active policy; its nodes carry
//! `nvidia.com/gpu.workload.config=container` so a policy with sandbox workloads cannot change
//! their gates.
#![cfg(feature = "e2e")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod table;

use std::{collections::BTreeMap, future, sync::Arc, time::Duration};

use futures::StreamExt as _;
use gpu_operator_api::{ClusterPolicy, ClusterPolicySpec};
use gpu_operator_core::{
    Context,
    cache::{change_stream, node_meta::NodeMeta, stores},
    report::{exposition, metrics::Metrics},
};
use gpu_operator_harness::{
    access::kubectl_ok,
    client,
    crd::ensure_crd,
    fleet::{NFD_NVIDIA_PCI, Profile},
    unique_name, wait_until,
};
use gpu_operator_node_labels::NodeLabeler;
use k8s_openapi::api::core::v1::Node;
use kube::{
    Api, ResourceExt as _,
    api::{Patch, PatchParams, PostParams},
    runtime::{WatchStreamExt as _, reflector, watcher},
};
use serde_json::json;
use table::{expected_labels, managed};
use tokio::{sync::oneshot, task::JoinHandle};

const TIMEOUT: Duration = Duration::from_secs(60);
/// Label that scopes a test's node cache to the nodes it created.
const RUN_LABEL: &str = "gpu-operator.e2e/node-labels-run";
const PRESENT: &str = "nvidia.com/gpu.present";
const DEPLOY: &str = "nvidia.com/gpu.deploy.";
const OPERANDS: &str = "nvidia.com/gpu.deploy.operands";
const MIG_MANAGER: &str = "nvidia.com/gpu.deploy.mig-manager";
/// The container workload gates, mig-manager aside.
const CONTAINER_GATES: [&str; 9] = [
    "driver",
    "gpu-feature-discovery",
    "container-toolkit",
    "device-plugin",
    "dcgm",
    "dcgm-exporter",
    "node-status-exporter",
    "operator-validator",
    "client",
];

/// One test's world: its run label, its ClusterPolicy, its nodes; deleted when dropped.
struct World {
    client: kube::Client,
    run: String,
    policy: String,
}

impl World {
    async fn new() -> Self {
        ensure_crd().await.unwrap();
        let client = client().await.unwrap();
        let run = unique_name("labels");
        let policy = unique_name("node-labels");
        Api::<ClusterPolicy>::all(client.clone())
            .create(
                &PostParams::default(),
                &ClusterPolicy::new(&policy, ClusterPolicySpec::default()),
            )
            .await
            .unwrap();
        Self {
            client,
            run,
            policy,
        }
    }

    fn nodes(&self) -> Api<Node> {
        Api::all(self.client.clone())
    }

    /// Creates a node of `profile` in this world, with `extra` labels.
    async fn create(&self, profile: Profile, extra: &[(&str, &str)]) -> String {
        let name = unique_name(&format!("labels-{profile}"));
        let mut node = profile.node(&name);
        let labels = node.metadata.labels.get_or_insert_with(BTreeMap::new);
        labels.insert(RUN_LABEL.to_owned(), self.run.clone());
        labels.insert(
            "nvidia.com/gpu.workload.config".to_owned(),
            "container".to_owned(),
        );
        for (key, value) in extra {
            labels.insert((*key).to_owned(), (*value).to_owned());
        }
        self.nodes()
            .create(&PostParams::default(), &node)
            .await
            .unwrap();
        name
    }

    /// The node's labels, without the `beta.kubernetes.io/*` ones the controller-manager adds on
    /// its own schedule to a node created without them (neither the test nor the operator writes
    /// them).
    async fn labels(&self, name: &str) -> BTreeMap<String, String> {
        let mut labels = self.nodes().get(name).await.unwrap().labels().clone();
        labels.retain(|key, _| !key.starts_with("beta.kubernetes.io/"));
        labels
    }

    /// Sets (`Some`) or removes (`None`) labels of a node, as a user would.
    async fn relabel(&self, name: &str, labels: &[(&str, Option<&str>)]) {
        let labels: serde_json::Map<_, _> = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), json!(v)))
            .collect();
        let patch = json!({ "metadata": { "labels": labels } });
        self.nodes()
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }
}

impl Drop for World {
    fn drop(&mut self) {
        let selector = format!("{RUN_LABEL}={}", self.run);
        let _ = kubectl_ok(&["delete", "nodes", "-l", &selector, "--wait=false"]);
        let _ = kubectl_ok(&[
            "delete",
            "clusterpolicy",
            &self.policy,
            "--ignore-not-found",
            "--wait=false",
        ]);
    }
}

/// The reconciler running in this process, on caches scoped to one world's nodes.
struct Reconciler {
    labeler: Arc<NodeLabeler>,
    metrics: Arc<Metrics>,
    stop: oneshot::Sender<()>,
    controller: JoinHandle<()>,
    caches: JoinHandle<()>,
}

impl Reconciler {
    async fn start(world: &World) -> Self {
        let client = world.client.clone();
        let (mut caches, mut subs, driver) =
            stores::start(&client, "default", gpu_operator_core::dra_api::DraApi::V1);
        // The shared node cache, narrowed to this world's nodes.
        let (nodes, writer) = reflector::store();
        caches.nodes = nodes;
        let selector = format!("{RUN_LABEL}={}", world.run);
        let events = watcher(
            Api::<NodeMeta>::all(client.clone()),
            watcher::Config::default().labels(&selector),
        )
        .default_backoff();
        let (_, [labels], events) =
            change_stream::reflect(events, writer, 256, [NodeMeta::labels_changed]);
        subs.node_labels = labels;
        let node_watch = events.for_each(|_| future::ready(()));
        let caches_task = tokio::spawn(async move {
            futures::join!(driver, node_watch);
        });
        caches.wait_until_ready().await.unwrap();
        let metrics = Arc::new(Metrics::new());
        let ctx = Arc::new(Context::new(
            client,
            "default".to_owned(),
            caches,
            metrics.clone(),
            None,
            // The labeller renders no operand: no image variables to read.
            &[],
        ));
        let labeler = NodeLabeler::new(ctx);
        let (stop, stopped) = oneshot::channel::<()>();
        let controller = tokio::spawn(labeler.clone().run(&subs, async move {
            let _ = stopped.await;
        }));
        Self {
            labeler,
            metrics,
            stop,
            controller,
            caches: caches_task,
        }
    }

    /// Waits until the labels the operator manages on every node of `expected` (`gpu.present`,
    /// the deploy gates, `mig.config`) are exactly the expected ones, then returns the nodes'
    /// labels.
    async fn converged(
        &self,
        world: &World,
        expected: &[(&str, BTreeMap<String, String>)],
    ) -> Vec<BTreeMap<String, String>> {
        let result = wait_until(
            "the nodes to be labelled as the table says",
            TIMEOUT,
            || async {
                let mut all = Vec::new();
                for (name, want) in expected {
                    let labels = world.labels(name).await;
                    if managed(&labels) != *want {
                        return Ok(None);
                    }
                    all.push(labels);
                }
                Ok(Some(all))
            },
        )
        .await;
        match result {
            Ok(all) => all,
            Err(error) => {
                let mut got = Vec::new();
                for (name, _) in expected {
                    got.push((*name, managed(&world.labels(name).await)));
                }
                panic!("{error}: expected {expected:#?}, got {got:#?}");
            }
        }
    }

    /// Reconciles the node labeller has finished (its `/metrics` counter).
    fn reconciles(&self) -> f64 {
        let text = self.metrics.encode().unwrap();
        let samples = exposition::samples(&text).unwrap();
        exposition::value(
            &samples,
            "gpu_operator_reconcile_duration_seconds_count",
            &[("reconciler", "node-labels"), ("error", "")],
        )
        .unwrap_or_default()
    }

    /// Waits until the labeller has finished a reconcile after `before` (its count then).
    async fn wait_reconciled_after(&self, before: f64, what: &str) {
        wait_until(
            &format!("the labeller to reconcile after {what}"),
            TIMEOUT,
            || async { Ok((self.reconciles() > before).then_some(())) },
        )
        .await
        .unwrap();
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        tokio::time::timeout(TIMEOUT, self.controller)
            .await
            .expect("the controller shuts down gracefully")
            .unwrap();
        self.caches.abort();
    }
}

fn gates(labels: &BTreeMap<String, String>) -> BTreeMap<&str, &str> {
    labels
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix(DEPLOY)?, v.as_str())))
        .collect()
}

fn assert_container_gates(labels: &BTreeMap<String, String>, mig: bool, node: &str) {
    let gates = gates(labels);
    for gate in CONTAINER_GATES {
        assert_eq!(
            gates.get(gate),
            Some(&"true"),
            "{node}: gate {gate} in {gates:?}"
        );
    }
    let expected = CONTAINER_GATES.len() + usize::from(mig);
    assert_eq!(gates.len(), expected, "{node}: {gates:?}");
    assert_eq!(gates.contains_key("mig-manager"), mig, "{node}: {gates:?}");
}

#[tokio::test]
async fn gpu_nodes_get_presence_and_gates_cpu_nodes_nothing_and_idle_means_no_patches() {
    let world = World::new().await;
    // Created before the reconciler starts: labelled from the initial list.
    let mut nodes = Vec::new();
    for profile in Profile::ALL {
        nodes.push((profile, world.create(profile, &[]).await));
    }
    let reconciler = Reconciler::start(&world).await;
    let expected: Vec<(&str, BTreeMap<String, String>)> = nodes
        .iter()
        .map(|(profile, n)| (n.as_str(), expected_labels(*profile)))
        .collect();
    let labelled = reconciler.converged(&world, &expected).await;
    for ((profile, name), labels) in nodes.iter().zip(&labelled) {
        if profile.gpu_count() > 0 {
            assert_eq!(
                labels.get(PRESENT).map(String::as_str),
                Some("true"),
                "{name}"
            );
            assert_container_gates(labels, profile.mig_capable(), name);
        } else {
            assert!(!labels.contains_key(PRESENT), "{name}: {labels:?}");
            assert!(gates(labels).is_empty(), "{name}: {labels:?}");
        }
    }
    // Idle: neither an annotation nor a foreign label leads to a patch. (How many patches the
    // labelling took is not asserted: an operator started by another test labels every node by
    // the same rules, so either may write first.)
    let initial = reconciler.labeler.patches();
    let (_, h100) = &nodes[0];
    let annotate = json!({ "metadata": { "annotations": { "e2e.example/touched": "yes" } } });
    world
        .nodes()
        .patch(h100, &PatchParams::default(), &Patch::Merge(&annotate))
        .await
        .unwrap();
    // The marker: the label change wakes the labeller; read once it has reconciled after it.
    let before = reconciler.reconciles();
    world
        .relabel(h100, &[("e2e.example/touched", Some("yes"))])
        .await;
    reconciler
        .wait_reconciled_after(before, "a foreign label")
        .await;
    assert_eq!(
        reconciler.labeler.patches(),
        initial,
        "a converged node was patched"
    );
    let mut expected = labelled[0].clone();
    expected.insert("e2e.example/touched".to_owned(), "yes".to_owned());
    assert_eq!(world.labels(h100).await, expected);
    // Positive control: a gate removed by hand is written back, and the count of patches sees it.
    world.relabel(h100, &[(MIG_MANAGER, None)]).await;
    wait_until("the removed gate to come back", TIMEOUT, || async {
        Ok(world
            .labels(h100)
            .await
            .contains_key(MIG_MANAGER)
            .then_some(()))
    })
    .await
    .unwrap();
    assert!(
        reconciler.labeler.patches() > initial,
        "the patch was not counted"
    );
    reconciler.stop().await;
}

#[tokio::test]
async fn values_users_set_are_kept_and_operands_false_removes_every_gate() {
    let world = World::new().await;
    let reconciler = Reconciler::start(&world).await;
    let name = world
        .create(
            Profile::H100,
            &[
                ("nvidia.com/gpu.deploy.device-plugin", "false"),
                ("nvidia.com/gpu.deploy.driver", "pre-installed"),
                ("nvidia.com/gpu.deploy.dcgm", "paused-for-mig-change"),
            ],
        )
        .await;
    let mut expected = expected_labels(Profile::H100);
    for (gate, value) in [
        ("device-plugin", "false"),
        ("driver", "pre-installed"),
        ("dcgm", "paused-for-mig-change"),
    ] {
        expected.insert(format!("{DEPLOY}{gate}"), value.to_owned());
    }
    let labels = reconciler
        .converged(&world, &[(&name, expected)])
        .await
        .remove(0);
    let kept = gates(&labels);
    assert_eq!(kept["device-plugin"], "false");
    assert_eq!(kept["driver"], "pre-installed");
    assert_eq!(kept["dcgm"], "paused-for-mig-change");
    assert_eq!(kept["container-toolkit"], "true");
    assert_eq!(kept["mig-manager"], "true");

    world.relabel(&name, &[(OPERANDS, Some("false"))]).await;
    wait_until("operands=false to remove every gate", TIMEOUT, || async {
        let labels = world.labels(&name).await;
        let left: Vec<&str> = gates(&labels).into_keys().collect();
        Ok((left == ["operands"]).then_some(()))
    })
    .await
    .unwrap();
    assert_eq!(world.labels(&name).await[PRESENT], "true");

    // Opting back in brings every gate back, now with the default value.
    world.relabel(&name, &[(OPERANDS, None)]).await;
    let labels = reconciler
        .converged(&world, &[(&name, expected_labels(Profile::H100))])
        .await
        .remove(0);
    assert_container_gates(&labels, true, &name);
    reconciler.stop().await;
}

#[tokio::test]
async fn a_new_node_is_labelled_and_a_node_that_loses_its_gpu_is_unlabelled() {
    let world = World::new().await;
    let reconciler = Reconciler::start(&world).await;
    // Created while the reconciler runs: labelled from the watch.
    let h100 = world.create(Profile::H100, &[]).await;
    let t4 = world.create(Profile::T4, &[]).await;
    let labelled = reconciler
        .converged(
            &world,
            &[
                (&h100, expected_labels(Profile::H100)),
                (&t4, expected_labels(Profile::T4)),
            ],
        )
        .await;
    assert_container_gates(&labelled[0], true, &h100);
    assert_container_gates(&labelled[1], false, &t4);

    // NFD no longer reports the GPU: presence flips to false, the gates go.
    world.relabel(&h100, &[(NFD_NVIDIA_PCI, None)]).await;
    let labels = wait_until("the former GPU node to be unlabelled", TIMEOUT, || async {
        let labels = world.labels(&h100).await;
        Ok(
            (labels.get(PRESENT).map(String::as_str) == Some("false") && gates(&labels).is_empty())
                .then_some(labels),
        )
    })
    .await
    .unwrap();
    assert!(!labels.contains_key(MIG_MANAGER));
    // The T4 node was not touched meanwhile.
    assert_eq!(world.labels(&t4).await, labelled[1]);
    reconciler.stop().await;
}
