//! Helpers of the real-node tests: a namespace per test whose pods go to the real node (they
//! tolerate its taint), waiting with the pods' state and events in the failure message, and
//! container logs through `kubectl logs` (the API server reaching the kubelet).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::missing_panics_doc,
    reason = "test support: a step that cannot be taken fails the test that takes it"
)]

use std::{path::PathBuf, time::Duration};

use gpu_operator_api::{ClusterPolicy, conditions::NODES_VALIDATED};
use gpu_operator_harness::{
    chart::{operator_kubeconfig, remove_operator_rbac},
    client, kubectl,
    operator::{IMAGES, Operator},
    real_node::{NODE_NAME, TAINT, our_image},
    unique_name, wait_until,
};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};

/// A namespace of one test, deleted by [`TestNamespace::delete`].
pub struct TestNamespace {
    /// Its name.
    pub name: String,
    /// The admin client.
    pub client: kube::Client,
}

impl TestNamespace {
    /// Creates a namespace named after `prefix`.
    pub async fn new(prefix: &str) -> Self {
        Self::with_labels(prefix, json!({})).await
    }

    /// Creates a namespace named after `prefix` with `labels` (e.g. Pod Security enforcement).
    pub async fn with_labels(prefix: &str, labels: Value) -> Self {
        let client = client().await.unwrap();
        let name = unique_name(prefix);
        let namespace: Namespace =
            serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap();
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .unwrap();
        Self { name, client }
    }

    /// Creates `pod` on the real node (node name and toleration added); returns its name.
    pub async fn create_pod(&self, mut pod: Value) -> String {
        pod["spec"]["nodeName"] = NODE_NAME.into();
        pod["spec"]["tolerations"] = json!([{ "key": TAINT.0, "operator": "Exists" }]);
        let pod: Pod = serde_json::from_value(pod).unwrap();
        let created = Api::<Pod>::namespaced(self.client.clone(), &self.name)
            .create(&PostParams::default(), &pod)
            .await
            .unwrap();
        created.metadata.name.unwrap()
    }

    /// [`wait_until`], failing with the namespace's pods and events.
    pub async fn wait<T, F, Fut>(&self, what: &str, timeout: Duration, check: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = anyhow::Result<Option<T>>>,
    {
        match wait_until(what, timeout, check).await {
            Ok(value) => value,
            Err(error) => panic!("{error}\n{}", self.describe()),
        }
    }

    /// The operator as a host process under the chart's RBAC, operating in this namespace with
    /// our image as its validator image; and the test's scratch directory (its log is there).
    pub async fn start_operator(&self) -> (Operator, PathBuf) {
        let dir = std::env::temp_dir().join(&self.name);
        std::fs::create_dir_all(&dir).unwrap();
        let (kubeconfig, _) = operator_kubeconfig(&self.client, &self.name, &self.name, &dir)
            .await
            .unwrap();
        let image = our_image();
        let mut env: Vec<(&str, &str)> = IMAGES
            .iter()
            .copied()
            .filter(|(k, _)| *k != "VALIDATOR_IMAGE")
            .collect();
        env.push(("VALIDATOR_IMAGE", &image));
        let operator =
            Operator::start(&kubeconfig, &self.name, &env, &dir.join("operator.log")).unwrap();
        (operator, dir)
    }

    /// Creates a ClusterPolicy named after this namespace: NVIDIA's defaults, with `edit` applied
    /// to its `spec` (as JSON).
    pub async fn create_policy(&self, edit: impl FnOnce(&mut Value)) {
        let mut policy = serde_json::to_value(ClusterPolicy::new(
            &self.name,
            gpu_operator_api::ClusterPolicySpec::default(),
        ))
        .unwrap();
        edit(&mut policy["spec"]);
        let policy: ClusterPolicy = serde_json::from_value(policy).unwrap();
        Api::<ClusterPolicy>::all(self.client.clone())
            .create(&PostParams::default(), &policy)
            .await
            .unwrap();
    }

    /// The message of ClusterPolicy `policy`'s `NodesValidated` once it contains `expected`.
    pub async fn nodes_validated(&self, policy: &str, expected: &str) -> String {
        let policies: Api<ClusterPolicy> = Api::all(self.client.clone());
        self.wait(
            &format!("NodesValidated to say {expected:?}"),
            Duration::from_secs(120),
            || async {
                let current = policies.get(policy).await?;
                let message = crate::scenario::condition(&current, NODES_VALIDATED)
                    .map(|c| c.message.clone())
                    .unwrap_or_default();
                Ok(message.contains(expected).then_some(message))
            },
        )
        .await
    }

    /// Undoes [`Self::start_operator`] and [`Self::create_policy`], then deletes the namespace.
    pub async fn finish(self, operator: Operator) {
        operator.stop().unwrap();
        Api::<ClusterPolicy>::all(self.client.clone())
            .delete(&self.name, &DeleteParams::default())
            .await
            .unwrap();
        remove_operator_rbac(&self.name);
        self.delete().await;
    }

    /// `kubectl get pods -o yaml` and the events of the namespace, for failure messages.
    pub fn describe(&self) -> String {
        let run = |args: &[&str]| {
            kubectl()
                .args(args)
                .args(["-n", &self.name])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default()
        };
        format!(
            "pods:\n{}\nevents:\n{}",
            run(&["get", "pods", "-o", "yaml"]),
            run(&["get", "events"])
        )
    }

    /// Deletes the namespace (its pods go with it).
    pub async fn delete(self) {
        Api::<Namespace>::all(self.client.clone())
            .delete(&self.name, &DeleteParams::default())
            .await
            .unwrap();
    }
}

/// NFD's label for an NVIDIA PCI device: what makes the operator treat a node as a GPU node.
const NFD_NVIDIA: &str = "feature.node.kubernetes.io/pci-10de.present";

/// Sets (or, with `None`, removes) NFD's NVIDIA label on the real node.
pub async fn label_gpu_node(nodes: &Api<Node>, value: Option<&str>) {
    let patch = json!({"metadata": {"labels": {NFD_NVIDIA: value}}});
    nodes
        .patch(NODE_NAME, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// A ClusterPolicy section (`validator`, `nodeStatusExporter`) naming our image, which the real
/// node has imported (so it is never pulled).
pub fn our_image_section() -> Value {
    let image = our_image();
    let (repository, rest) = image.rsplit_once('/').unwrap();
    let (name, version) = rest.split_once(':').unwrap();
    json!({"repository": repository, "image": name, "version": version, "imagePullPolicy": "Never"})
}

/// `kubectl logs` of one container (empty while it has none).
pub fn container_logs(namespace: &str, pod: &str, container: &str) -> String {
    kubectl()
        .args(["logs", "-n", namespace, pod, "-c", container])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

/// The state of the pod's first init container (`{"running": …}`, `{"terminated": …}`, …).
pub async fn init_state(client: &kube::Client, namespace: &str, pod: &str) -> Value {
    let pod = Api::<Pod>::namespaced(client.clone(), namespace)
        .get(pod)
        .await
        .unwrap();
    let status = serde_json::to_value(pod.status).unwrap();
    status["initContainerStatuses"][0]["state"].clone()
}
