//! The world of the driver upgrade scenario: eight more GPU nodes (14 in all with the cluster's),
//! GPU workloads in a namespace of their own (one ReplicaSet pod per chosen node, one guarded by a
//! PodDisruptionBudget that allows no eviction, one bare "training job" pod the upgrade must wait
//! for), and a recorder that watches every GPU node's upgrade state and cordon.

use std::{
    collections::{BTreeMap, btree_map::Entry},
    sync::{Arc, Mutex},
};

use futures::StreamExt as _;
use gpu_operator_harness::{
    access::kubectl_ok,
    fleet::{KWOK_LABEL, Profile},
};
use k8s_openapi::api::core::v1::Node;
use kube::{
    Api, ResourceExt as _,
    api::PostParams,
    runtime::{WatchStreamExt as _, watcher},
};
use serde_json::json;

use super::support::{Env, TEMPORARY};

pub const STATE: &str = "nvidia.com/gpu-driver-upgrade-state";
pub const SKIP: &str = "nvidia.com/gpu-driver-upgrade.skip";
/// NVIDIA v26.7's GPU-client node label.
pub const CLIENT: &str = "nvidia.com/gpu.deploy.client";
/// The node annotations of driver upgrades (NVIDIA's and ours).
const ANNOTATIONS: [&str; 6] = [
    "nvidia.com/gpu-driver-upgrade-enabled",
    "nvidia.com/gpu-driver-upgrade-requested",
    "nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable",
    "nvidia.com/gpu-driver-upgrade.state-since",
    "nvidia.com/gpu-driver-upgrade.failure-reason",
    "nvidia.com/gpu-driver-upgrade.restart-pod-uid",
];
/// States between admission and done, by hand from NVIDIA's list (reference §1.7).
pub const IN_PROGRESS: [&str; 7] = [
    "cordon-required",
    "wait-for-jobs-required",
    "pod-deletion-required",
    "drain-required",
    "pod-restart-required",
    "validation-required",
    "uncordon-required",
];

/// Adds `count` H100 nodes labelled [`TEMPORARY`]; deletes them (and undoes what the scenario did
/// to the cluster's own nodes: cordons, skip labels, upgrade labels) when dropped.
pub struct World {
    pub added: Vec<String>,
    pub touched: Vec<String>,
    pub namespace: String,
}

impl World {
    pub async fn new(env: &Env, count: usize) -> Self {
        let namespace = gpu_operator_harness::unique_name("ml");
        let mut world = Self {
            added: Vec::new(),
            touched: Vec::new(),
            namespace,
        };
        for i in 0..count {
            let name = gpu_operator_harness::unique_name(&format!("upg{i:02}"));
            let mut node: Node = Profile::H100.node(&name);
            node.labels_mut()
                .insert(TEMPORARY.to_owned(), "true".to_owned());
            Api::<Node>::all(env.client.clone())
                .create(&PostParams::default(), &node)
                .await
                .unwrap();
            world.added.push(name);
        }
        kubectl_ok(&["create", "namespace", &world.namespace]).unwrap();
        scrub_upgrade_marks();
        world
    }

    /// A ReplicaSet of one pod on `node` asking for a GPU, labelled `app=<app>`.
    pub fn gpu_replicaset(&self, app: &str, node: &str) {
        self.workload(
            "ReplicaSet",
            app,
            node,
            json!({"containers": [gpu_container()]}),
        );
    }

    /// A ReplicaSet of one pod on `node` that requests no GPU but runs under the NVIDIA runtime
    /// class (so it sees every GPU), labelled `app=<app>`.
    pub fn runtime_replicaset(&self, app: &str, node: &str) {
        self.workload(
            "ReplicaSet",
            app,
            node,
            json!({
                "runtimeClassName": "nvidia",
                "containers": [{"name": "render", "image": "nvcr.io/nvidia/cuda:12.8.1-base-ubuntu24.04"}],
            }),
        );
    }

    /// A DaemonSet on `node` under the NVIDIA runtime class (a standalone exporter), `app=<app>`.
    pub fn gpu_daemonset(&self, app: &str, node: &str) {
        self.workload(
            "DaemonSet",
            app,
            node,
            json!({
                "runtimeClassName": "nvidia",
                "containers": [{"name": "exporter", "image": "nvcr.io/nvidia/k8s/dcgm-exporter:4.4.1-4.5.2-ubuntu22.04"}],
            }),
        );
    }

    /// A DaemonSet on `node` whose nodeSelector names `nvidia.com/gpu.deploy.client=true`
    /// (NVIDIA v26.7's contract for third-party GPU clients), `app=<app>`.
    pub fn client_daemonset(&self, app: &str, node: &str) {
        self.workload(
            "DaemonSet",
            app,
            node,
            json!({
                "nodeSelector": {CLIENT: "true"},
                "containers": [{"name": "profiler", "image": "nvcr.io/nvidia/cuda:12.8.1-base-ubuntu24.04"}],
            }),
        );
    }

    /// A ResourceClaim `<app>-gpu` allocated a GPU of NVIDIA's DRA driver (written as the
    /// scheduler writes an allocation; no DRA driver runs here), and a ReplicaSet of one pod on
    /// `node` that uses it and requests nothing else, `app=<app>`.
    pub fn dra_replicaset(&self, app: &str, node: &str) {
        let claim = format!("{app}-gpu");
        apply(&json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": claim, "namespace": self.namespace},
            "spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}
        }));
        let allocation = json!({"status": {"allocation": {
            "allocationTimestamp": "2026-01-01T00:00:00Z",
            "devices": {"results": [
            {"request": "gpu", "driver": "gpu.nvidia.com", "pool": node, "device": "gpu-0"}]}}}});
        kubectl_ok(&[
            "patch",
            "resourceclaim",
            &claim,
            "-n",
            &self.namespace,
            "--subresource=status",
            "--type=merge",
            "-p",
            &allocation.to_string(),
        ])
        .unwrap();
        self.workload(
            "ReplicaSet",
            app,
            node,
            json!({
                "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}],
                "containers": [{"name": "infer", "image": "nvcr.io/nvidia/cuda:12.8.1-base-ubuntu24.04"}],
            }),
        );
    }

    /// A `kind` (ReplicaSet of one pod, or DaemonSet) named and labelled `app=<app>`, whose pod
    /// runs `pod` (its spec without the node selector) on `node`.
    fn workload(&self, kind: &str, app: &str, node: &str, mut pod: serde_json::Value) {
        pod["nodeSelector"]["kubernetes.io/hostname"] = json!(node);
        let mut spec = json!({
            "selector": {"matchLabels": {"app": app}},
            "template": {"metadata": {"labels": {"app": app}}, "spec": pod},
        });
        if kind == "ReplicaSet" {
            spec["replicas"] = json!(1);
        }
        apply(&json!({
            "apiVersion": "apps/v1", "kind": kind,
            "metadata": {"name": app, "namespace": self.namespace},
            "spec": spec,
        }));
    }

    /// A PodDisruptionBudget over `app=<app>` keeping `min_available` pods.
    pub fn pdb(&self, app: &str, min_available: u32) {
        apply(&json!({
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": app, "namespace": self.namespace},
            "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": app}}}
        }));
    }

    /// A bare pod on `node` asking for a GPU, labelled `app=training`: a job the upgrade waits for.
    pub fn training_job(&self, name: &str, node: &str) {
        apply(&json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": self.namespace, "labels": {"app": "training"}},
            "spec": {"nodeName": node, "restartPolicy": "Never", "containers": [gpu_container()]}
        }));
    }

    /// Marks pod `name` Succeeded, as its kubelet would when the job ends.
    pub fn finish(&self, name: &str) {
        kubectl_ok(&[
            "patch",
            "pod",
            name,
            "-n",
            &self.namespace,
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"phase":"Succeeded"}}"#,
        ])
        .unwrap();
    }

    pub fn touch(&mut self, node: &str) {
        self.touched.push(node.to_owned());
    }
}

fn gpu_container() -> serde_json::Value {
    json!({
        "name": "cuda", "image": "nvcr.io/nvidia/cuda:12.8.1-base-ubuntu24.04",
        "resources": {"limits": {"nvidia.com/gpu": "1"}}
    })
}

fn apply(object: &serde_json::Value) {
    let file = std::env::temp_dir().join(gpu_operator_harness::unique_name("object.json"));
    std::fs::write(&file, object.to_string()).unwrap();
    kubectl_ok(&["apply", "-f", file.to_str().unwrap()]).unwrap();
}

impl Drop for World {
    fn drop(&mut self) {
        for node in &self.added {
            let _ = kubectl_ok(&["delete", "node", node, "--ignore-not-found", "--wait=false"]);
        }
        for node in &self.touched {
            let _ = kubectl_ok(&["uncordon", node]);
            let _ = kubectl_ok(&[
                "label",
                "node",
                node,
                &format!("{SKIP}-"),
                &format!("{STATE}-"),
            ]);
        }
        // What the upgrade left on the cluster's nodes if the scenario stopped halfway.
        scrub_upgrade_marks();
        let _ = kubectl_ok(&["delete", "namespace", &self.namespace, "--wait=false"]);
    }
}

/// Removes the upgrade state label and annotations from every simulated node: what an earlier
/// scenario left (the chart's default `autoUpgrade: true` labels every node `upgrade-done`, and
/// nothing removes that once its policy is gone) must not be taken for this scenario's moves.
fn scrub_upgrade_marks() {
    let kwok = format!("{}={}", KWOK_LABEL.0, KWOK_LABEL.1);
    let _ = kubectl_ok(&["label", "nodes", "-l", &kwok, &format!("{STATE}-")]);
    let mut annotate = vec!["annotate".to_owned(), "nodes".into(), "-l".into(), kwok];
    annotate.extend(ANNOTATIONS.iter().map(|a| format!("{a}-")));
    let args: Vec<&str> = annotate.iter().map(String::as_str).collect();
    let _ = kubectl_ok(&args);
    let paused = format!("{CLIENT}=paused-for-driver-upgrade");
    let _ = kubectl_ok(&[
        "label",
        "nodes",
        "-l",
        &paused,
        &format!("{CLIENT}=true"),
        "--overwrite",
    ]);
}

/// What the recorder saw of the GPU nodes.
#[derive(Debug, Default)]
pub struct Seen {
    /// Each node's upgrade states, in the order they came, repeats of the same value folded.
    pub states: BTreeMap<String, Vec<String>>,
    /// The most nodes in an in-progress state at once.
    pub max_in_progress: usize,
    /// The most GPU nodes out of service (cordoned, upgrading or failed) at once.
    pub max_unavailable: usize,
    /// Nodes seen cordoned.
    pub cordoned: Vec<String>,
    current: BTreeMap<String, (Option<String>, bool)>,
}

/// Watches the GPU nodes (`gpus`) and records into the returned [`Seen`] until aborted.
pub fn record(env: &Env, gpus: Vec<String>) -> (Arc<Mutex<Seen>>, tokio::task::JoinHandle<()>) {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let into = seen.clone();
    let api = Api::<Node>::all(env.client.clone());
    let task = tokio::spawn(async move {
        let mut events = watcher(api, watcher::Config::default())
            .applied_objects()
            .boxed();
        while let Some(Ok(node)) = events.next().await {
            let name = node.name_any();
            if !gpus.contains(&name) {
                continue;
            }
            let state = node.labels().get(STATE).cloned();
            let cordoned = node
                .spec
                .as_ref()
                .and_then(|s| s.unschedulable)
                .unwrap_or(false);
            let mut seen = into.lock().unwrap();
            // The first sight of a node (the initial list) is where it starts, not a move.
            if let Entry::Vacant(first) = seen.current.entry(name.clone()) {
                first.insert((state, cordoned));
                continue;
            }
            // Only a move is recorded: any other change to the node (a heartbeat, a label of
            // someone else's) repeats the state it already had.
            let before = seen.current.get(&name).and_then(|(s, _)| s.clone());
            if let Some(state) = &state
                && before.as_ref() != Some(state)
            {
                seen.states
                    .entry(name.clone())
                    .or_default()
                    .push(state.clone());
            }
            if cordoned && !seen.cordoned.contains(&name) {
                seen.cordoned.push(name.clone());
            }
            seen.current.insert(name, (state, cordoned));
            let busy = |s: &Option<String>| s.as_deref().is_some_and(|s| IN_PROGRESS.contains(&s));
            let in_progress = seen.current.values().filter(|(s, _)| busy(s)).count();
            let unavailable = seen
                .current
                .values()
                .filter(|(s, c)| *c || busy(s) || s.as_deref() == Some("upgrade-failed"))
                .count();
            seen.max_in_progress = seen.max_in_progress.max(in_progress);
            seen.max_unavailable = seen.max_unavailable.max(unavailable);
        }
    });
    (seen, task)
}
