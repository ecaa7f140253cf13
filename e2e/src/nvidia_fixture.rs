//! The state NVIDIA's operator v26.7.0 left on the default fleet (`e2e/fixtures/nvidia-v26.7.0`,
//! objects dumped from a run of it): read, and loaded into a namespace as NVIDIA's client wrote
//! it. The migration scenario and the migration page's commands start from it.
#![allow(
    clippy::unwrap_used,
    clippy::missing_panics_doc,
    reason = "test support: a step that cannot be taken fails the test that takes it"
)]

use std::collections::BTreeMap;

use gpu_operator_api::ClusterPolicy;
use gpu_operator_harness::{crd::repo_root, node_marks::Marks, wait_until};
use kube::{
    Api, ResourceExt as _,
    api::{
        ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
    },
};
use serde_json::{Value, json};

use crate::scenario::TIMEOUT;

/// NVIDIA's field manager (its client writes with plain updates).
pub const NVIDIA_MANAGER: &str = "gpu-operator";
/// The namespace NVIDIA's operator ran in when the fixture was taken.
const FIXTURE_NAMESPACE: &str = "gpu-operator";

/// The fixture, read from the repository.
pub struct Fixture {
    objects: Vec<Value>,
    policy: Value,
    nodes: BTreeMap<String, Value>,
}

impl Fixture {
    /// Reads the fixture from `e2e/fixtures/nvidia-v26.7.0`.
    pub fn read() -> Self {
        let dir = repo_root().join("e2e/fixtures/nvidia-v26.7.0");
        let read = |file: &str| std::fs::read_to_string(dir.join(file)).unwrap();
        let objects = serde_yaml::Deserializer::from_str(&read("objects.yaml"))
            .map(|doc| serde::Deserialize::deserialize(doc).unwrap())
            .collect();
        Self {
            objects,
            policy: serde_yaml::from_str(&read("clusterpolicy.yaml")).unwrap(),
            nodes: serde_yaml::from_str(&read("node-labels.yaml")).unwrap(),
        }
    }

    /// What NVIDIA's operator wrote on a node of `profile`, with a GPU node's OS set to the one
    /// the fixture's driver image is built for (Ubuntu 22.04).
    pub fn marks(&self, profile: &str, gpu: bool) -> Marks {
        let map = |key: &str| -> BTreeMap<String, String> {
            serde_json::from_value(self.nodes[profile][key].clone()).unwrap_or_default()
        };
        let mut labels = map("labels");
        if gpu {
            labels.insert(
                "feature.node.kubernetes.io/system-os_release.ID".into(),
                "ubuntu".into(),
            );
            labels.insert(
                "feature.node.kubernetes.io/system-os_release.VERSION_ID".into(),
                "22.04".into(),
            );
        }
        Marks {
            labels,
            annotations: map("annotations"),
        }
    }

    /// The names of NVIDIA's operand DaemonSets.
    pub fn daemonset_names(&self) -> Vec<String> {
        self.objects
            .iter()
            .filter(|o| o["kind"] == "DaemonSet")
            .map(|o| o["metadata"]["name"].as_str().unwrap().to_owned())
            .collect()
    }

    /// The ClusterPolicy as NVIDIA's chart rendered it (its labels and spec), named `name`.
    pub fn policy_manifest(&self, name: &str) -> Value {
        json!({
            "apiVersion": self.policy["apiVersion"],
            "kind": self.policy["kind"],
            "metadata": {"name": name, "labels": self.policy["metadata"]["labels"]},
            "spec": self.policy["spec"],
        })
    }

    /// Creates the ClusterPolicy as NVIDIA's chart rendered it, named `name`, with NVIDIA's status.
    pub async fn create_policy(&self, client: &kube::Client, name: &str) -> ClusterPolicy {
        let policy: ClusterPolicy = serde_json::from_value(self.policy_manifest(name)).unwrap();
        let params = PostParams {
            field_manager: Some("helm".to_owned()),
            ..PostParams::default()
        };
        Api::<ClusterPolicy>::all(client.clone())
            .create(&params, &policy)
            .await
            .unwrap();
        self.write_status(client, name).await
    }

    /// Writes the status NVIDIA's operator gave the ClusterPolicy onto ClusterPolicy `name`.
    pub async fn write_status(&self, client: &kube::Client, name: &str) -> ClusterPolicy {
        let patch = json!({"status": self.policy["status"]});
        let params = PatchParams {
            field_manager: Some(NVIDIA_MANAGER.to_owned()),
            ..PatchParams::default()
        };
        Api::<ClusterPolicy>::all(client.clone())
            .patch_status(name, &params, &Patch::Merge(&patch))
            .await
            .unwrap()
    }

    /// Creates every object of the fixture in `namespace`, owned by `policy`, as NVIDIA's
    /// client wrote them; returns their `Kind name`s. A cluster-scoped one left by an earlier
    /// scenario is replaced.
    pub async fn create_objects(
        &self,
        client: &kube::Client,
        namespace: &str,
        policy: &ClusterPolicy,
    ) -> Vec<(ApiResource, String)> {
        let mut created = Vec::new();
        for object in &self.objects {
            let mut object = object.clone();
            retarget(&mut object, namespace, policy);
            let resource = resource(&object);
            let api = api(client, &resource, &object);
            let object: DynamicObject = serde_json::from_value(object).unwrap();
            let params = PostParams {
                field_manager: Some(NVIDIA_MANAGER.to_owned()),
                ..PostParams::default()
            };
            if api.get_opt(&object.name_any()).await.unwrap().is_some() {
                api.delete(&object.name_any(), &DeleteParams::foreground())
                    .await
                    .unwrap();
                wait_until("an earlier object to go", TIMEOUT, || async {
                    Ok(api
                        .get_opt(&object.name_any())
                        .await?
                        .is_none()
                        .then_some(()))
                })
                .await
                .unwrap();
            }
            api.create(&params, &object).await.unwrap();
            created.push((resource, object.name_any()));
        }
        created
    }
}

/// Points `object` at `namespace` and at `policy` (by name and uid).
fn retarget(object: &mut Value, namespace: &str, policy: &ClusterPolicy) {
    let meta = &mut object["metadata"];
    if meta.get("namespace").is_some() {
        meta["namespace"] = json!(namespace);
    }
    for owner in meta["ownerReferences"].as_array_mut().into_iter().flatten() {
        owner["name"] = json!(policy.name_any());
        owner["uid"] = json!(policy.uid().unwrap());
    }
    for subject in object["subjects"].as_array_mut().into_iter().flatten() {
        if subject["namespace"] == FIXTURE_NAMESPACE {
            subject["namespace"] = json!(namespace);
        }
    }
}

fn resource(object: &Value) -> ApiResource {
    let (group, version) = match object["apiVersion"].as_str().unwrap().split_once('/') {
        Some((group, version)) => (group, version),
        None => ("", object["apiVersion"].as_str().unwrap()),
    };
    let kind = object["kind"].as_str().unwrap();
    let plural = match kind {
        "RuntimeClass" => "runtimeclasses".to_owned(),
        other => format!("{}s", other.to_lowercase()),
    };
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), &plural)
}

fn api(client: &kube::Client, resource: &ApiResource, object: &Value) -> Api<DynamicObject> {
    match object["metadata"]["namespace"].as_str() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
        None => Api::all_with(client.clone(), resource),
    }
}
