//! Proves the harness is a real cluster: simulated GPU nodes with their labels and capacity, the
//! DaemonSet controller, scheduler and kwok placing Ready pods, garbage collection, and RBAC.
#![cfg(feature = "e2e")]
// Test code: a failing step should fail the test loudly, helpers included.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::{collections::BTreeSet, time::Duration};

use gpu_operator_harness::{
    client,
    fleet::{KWOK_LABEL, NFD_NVIDIA_PCI, PROFILE_LABEL, Profile},
    unique_name, wait_until,
};
use k8s_openapi::{
    api::{
        apps::v1::DaemonSet,
        authentication::v1::TokenRequest,
        core::v1::{ConfigMap, Namespace, Node, Pod, Secret, ServiceAccount},
        rbac::v1::{Role, RoleBinding},
    },
    apimachinery::pkg::apis::meta::v1::OwnerReference,
};
use kube::{
    Api, Resource as _, ResourceExt as _,
    api::{DeleteParams, ListParams, PostParams},
};
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(90);

/// A namespace for one test, deleted (with everything in it) when dropped at the end of the test.
struct TestNamespace {
    client: kube::Client,
    name: String,
}

impl TestNamespace {
    async fn new(client: &kube::Client, prefix: &str) -> Self {
        let name = unique_name(prefix);
        let api: Api<Namespace> = Api::all(client.clone());
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
        api.create(&PostParams::default(), &ns).await.unwrap();
        Self {
            client: client.clone(),
            name,
        }
    }

    fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.name)
    }

    async fn delete(self) {
        let api: Api<Namespace> = Api::all(self.client.clone());
        api.delete(&self.name, &DeleteParams::default())
            .await
            .unwrap();
    }
}

async fn simulated_nodes(client: &kube::Client) -> Vec<Node> {
    let api: Api<Node> = Api::all(client.clone());
    let selector = format!("{}={}", KWOK_LABEL.0, KWOK_LABEL.1);
    api.list(&ListParams::default().labels(&selector))
        .await
        .unwrap()
        .items
}

#[tokio::test]
async fn simulated_nodes_carry_their_profiles_labels_and_capacity() {
    let client = client().await.unwrap();
    let nodes = simulated_nodes(&client).await;
    let profiles: BTreeSet<String> = nodes
        .iter()
        .filter_map(|n| n.labels().get(PROFILE_LABEL).cloned())
        .collect();
    for profile in Profile::ALL {
        assert!(
            profiles.contains(profile.name()),
            "the default fleet has no {profile} node: {profiles:?}"
        );
    }
    for node in &nodes {
        let profile: Profile = node.labels()[PROFILE_LABEL].parse().unwrap();
        let expected = profile.node(&node.name_any());
        for (key, value) in expected.labels() {
            assert_eq!(
                node.labels().get(key),
                Some(value),
                "node {} label {key}",
                node.name_any()
            );
        }
        let status = node.status.clone().unwrap();
        let capacity = status.capacity.unwrap();
        let gpus = capacity.get("nvidia.com/gpu").map(|q| q.0.as_str());
        if profile.gpu_count() > 0 {
            assert_eq!(
                gpus,
                Some(profile.gpu_count().to_string().as_str()),
                "node {}",
                node.name_any()
            );
            assert_eq!(
                node.labels().get(NFD_NVIDIA_PCI).map(String::as_str),
                Some("true")
            );
        } else {
            assert_eq!(gpus, None);
            assert!(!node.labels().contains_key(NFD_NVIDIA_PCI));
        }
        assert!(status.allocatable.unwrap().contains_key("cpu"));
        let info = status.node_info.unwrap();
        assert!(
            ["containerd://", "cri-o://", "docker://"]
                .iter()
                .any(|p| info.container_runtime_version.starts_with(p)),
            "runtime {}",
            info.container_runtime_version
        );
        assert!(gpu_operator_harness::fleet::Profile::ALL.contains(&profile));
        let ready = status
            .conditions
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        assert!(ready, "kwok did not make node {} Ready", node.name_any());
    }
}

fn gpu_daemonset(name: &str) -> DaemonSet {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "nodeSelector": {NFD_NVIDIA_PCI: "true"},
                    "containers": [{"name": "probe", "image": "registry.invalid/none:0"}]
                }
            }
        }
    }))
    .unwrap()
}

#[tokio::test]
async fn a_daemonset_on_the_nfd_gpu_label_gets_one_ready_pod_per_gpu_node_only() {
    let client = client().await.unwrap();
    let ns = TestNamespace::new(&client, "e2e-ds").await;
    let name = "gpu-probe";
    ns.api::<DaemonSet>()
        .create(&PostParams::default(), &gpu_daemonset(name))
        .await
        .unwrap();

    let gpu_nodes: BTreeSet<String> = simulated_nodes(&client)
        .await
        .into_iter()
        .filter(|n| n.labels().get(NFD_NVIDIA_PCI).is_some_and(|v| v == "true"))
        .map(|n| n.name_any())
        .collect();
    let cpu_nodes: BTreeSet<String> = simulated_nodes(&client)
        .await
        .into_iter()
        .filter(|n| !n.labels().contains_key(NFD_NVIDIA_PCI))
        .map(|n| n.name_any())
        .collect();
    assert!(!gpu_nodes.is_empty() && !cpu_nodes.is_empty());

    let pods: Api<Pod> = ns.api();
    let ready_nodes = wait_until("one Ready pod per GPU node", TIMEOUT, || async {
        let list = pods
            .list(&ListParams::default().labels(&format!("app={name}")))
            .await?;
        let ready: Vec<String> = list
            .items
            .iter()
            .filter(|p| {
                p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .filter_map(|p| p.spec.as_ref()?.node_name.clone())
            .collect();
        Ok((ready.len() >= gpu_nodes.len()).then_some((ready, list.items.len())))
    })
    .await
    .unwrap();
    let (ready, total_pods) = ready_nodes;
    let unique: BTreeSet<String> = ready.iter().cloned().collect();
    assert_eq!(unique.len(), ready.len(), "two pods on one node: {ready:?}");
    assert_eq!(
        total_pods,
        gpu_nodes.len(),
        "pods exist beyond the GPU nodes"
    );
    assert_eq!(unique, gpu_nodes);
    assert!(unique.is_disjoint(&cpu_nodes));

    let ds = wait_until(
        "the DaemonSet status to count the Ready pods",
        TIMEOUT,
        || async {
            let ds = ns.api::<DaemonSet>().get(name).await?;
            let status = ds.status.clone().unwrap_or_default();
            Ok((status.number_ready == i32::try_from(gpu_nodes.len())?).then_some(status))
        },
    )
    .await
    .unwrap();
    assert_eq!(
        ds.desired_number_scheduled,
        i32::try_from(gpu_nodes.len()).unwrap()
    );
    ns.delete().await;
}

#[tokio::test]
async fn deleting_the_owner_garbage_collects_the_daemonset() {
    let client = client().await.unwrap();
    let ns = TestNamespace::new(&client, "e2e-gc").await;
    let owners: Api<ConfigMap> = ns.api();
    let owner = owners
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "owner"}})).unwrap(),
        )
        .await
        .unwrap();
    let mut ds = gpu_daemonset("owned");
    ds.metadata.owner_references = Some(vec![OwnerReference {
        api_version: ConfigMap::api_version(&()).into_owned(),
        kind: ConfigMap::kind(&()).into_owned(),
        name: owner.name_any(),
        uid: owner.uid().unwrap(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }]);
    let daemonsets: Api<DaemonSet> = ns.api();
    daemonsets
        .create(&PostParams::default(), &ds)
        .await
        .unwrap();

    owners
        .delete("owner", &DeleteParams::background())
        .await
        .unwrap();
    wait_until(
        "the garbage collector to delete the owned DaemonSet",
        TIMEOUT,
        || async { Ok(daemonsets.get_opt("owned").await?.is_none().then_some(())) },
    )
    .await
    .unwrap();
    ns.delete().await;
}

#[tokio::test]
async fn a_service_account_token_authenticates_and_rbac_denies_what_its_role_does_not_grant() {
    let admin = client().await.unwrap();
    let ns = TestNamespace::new(&admin, "e2e-rbac").await;
    let account = "reader";
    let sa: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": account}})).unwrap();
    ns.api::<ServiceAccount>()
        .create(&PostParams::default(), &sa)
        .await
        .unwrap();
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": "pod-reader"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]
    }))
    .unwrap();
    ns.api::<Role>()
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "reader-pods"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": ns.name}]
    }))
    .unwrap();
    ns.api::<RoleBinding>()
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();

    let request: TokenRequest =
        serde_json::from_value(json!({"spec": {"audiences": [], "expirationSeconds": 600}}))
            .unwrap();
    let token = ns
        .api::<ServiceAccount>()
        .create_token_request(account, &PostParams::default(), &request)
        .await
        .unwrap()
        .status
        .unwrap()
        .token;

    let sa_client = gpu_operator_harness::access::client_with_token(&token)
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(sa_client.clone(), &ns.name);
    pods.list(&ListParams::default())
        .await
        .expect("the Role grants listing pods");

    let secrets: Api<Secret> = Api::namespaced(sa_client.clone(), &ns.name);
    match secrets.list(&ListParams::default()).await {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 403, "{status:?}");
            assert!(
                status
                    .message
                    .contains(&format!("system:serviceaccount:{}:{account}", ns.name)),
                "the denial names the authenticated service account: {}",
                status.message
            );
        }
        other => panic!("listing secrets must be forbidden, got {other:?}"),
    }
    let other_ns: Api<Pod> = Api::namespaced(sa_client, "default");
    assert!(
        matches!(other_ns.list(&ListParams::default()).await, Err(kube::Error::Api(s)) if s.code == 403)
    );
    ns.delete().await;
}
