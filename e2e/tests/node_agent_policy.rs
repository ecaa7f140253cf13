//! The node agents are confined to their own node, against the real API server: the chart's
//! ValidatingAdmissionPolicy is applied with the validator's RBAC (as the operator renders it) and
//! the discovery agent's (as the chart renders it); tokens are TokenRequest tokens bound to pods
//! pinned to a node, as kubelet projects them. A token bound to a pod on node A may set A's
//! `GPUDriverReady`, the validator's annotation and taint, the GPU health agent's conditions and
//! taint (the agent run as the real binary with that token), and (for the discovery agent, run as
//! the real binary) A's NFD labels; it is refused on node B, for a key the agent does not own,
//! for cordoning, and without a pod binding. Before the policy exists the same token may patch B
//! (RBAC alone cannot confine it): the positive control that the policy is what refuses.
#![cfg(feature = "e2e")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::{path::Path, process::Stdio, time::Duration};

use gpu_operator_harness::{
    access::{client_with_token, kubectl_ok},
    chart::{kubectl_apply, render},
    client,
    fleet::Profile,
    operator::workspace_binary,
    unique_name,
};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, ServiceAccount};
use kube::{
    Api,
    api::{Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};

const VALIDATOR: &str = "nvidia-operator-validator";
const KERNEL: &str = "feature.node.kubernetes.io/kernel-version.full";
const TIMEOUT: Duration = Duration::from_secs(60);

/// Deletes the test's nodes, namespace and cluster-scoped objects when dropped.
struct Cleanup {
    nodes: Vec<String>,
    release: String,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for node in &self.nodes {
            let _ = kubectl_ok(&["delete", "node", node, "--ignore-not-found"]);
        }
        let _ = kubectl_ok(&[
            "delete",
            "namespace",
            &self.release,
            "--ignore-not-found",
            "--wait=false",
        ]);
        for (kind, name) in [
            ("validatingadmissionpolicybinding", "node-agents"),
            ("validatingadmissionpolicy", "node-agents"),
            ("clusterrolebinding", "node-discovery"),
            ("clusterrole", "node-discovery"),
            ("clusterrolebinding", "validator"),
            ("clusterrole", "validator"),
        ] {
            let name = format!("{}-{name}", self.release);
            let _ = kubectl_ok(&["delete", kind, &name, "--ignore-not-found"]);
        }
    }
}

/// A pod of ServiceAccount `account` pinned to `node` (kwok may or may not run it: only its
/// binding to the node matters).
async fn pod_on(client: &kube::Client, namespace: &str, account: &str, node: &str) -> Pod {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let pod = json!({
        "metadata": {"name": format!("{account}-{node}")},
        "spec": {
            "nodeName": node,
            "serviceAccountName": account,
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "agent", "image": "agent"}],
        },
    });
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(pod).unwrap(),
    )
    .await
    .unwrap()
}

/// A token of `account`, bound to `pod` when given (the node-name claim comes with it).
async fn token(client: &kube::Client, namespace: &str, account: &str, pod: Option<&Pod>) -> String {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let mut spec = json!({"audiences": [], "expirationSeconds": 3600});
    if let Some(pod) = pod {
        spec["boundObjectRef"] = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "name": pod.metadata.name,
            "uid": pod.metadata.uid,
        });
    }
    let request = serde_json::from_value(json!({ "spec": spec })).unwrap();
    accounts
        .create_token_request(account, &PostParams::default(), &request)
        .await
        .unwrap()
        .status
        .unwrap()
        .token
}

/// The API's message for a refused patch; panics when the patch was accepted.
fn refused(result: Result<Node, kube::Error>, what: &str) -> String {
    match result {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 403, "{what}: {status:?}");
            status.message
        }
        other => panic!("{what}: not refused: {other:?}"),
    }
}

/// The validator's condition write, as it sends it (strategic merge of `nodes/status`).
async fn set_condition(nodes: &Api<Node>, node: &str, kind: &str) -> Result<Node, kube::Error> {
    let patch = json!({"status": {"conditions": [{
        "type": kind,
        "status": "True",
        "reason": "DriverValidated",
        "message": "e2e",
        "lastHeartbeatTime": "2026-01-01T00:00:00Z",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }]}});
    nodes
        .patch_status(node, &PatchParams::default(), &Patch::Strategic(patch))
        .await
}

async fn merge(nodes: &Api<Node>, node: &str, patch: Value) -> Result<Node, kube::Error> {
    nodes
        .patch(node, &PatchParams::default(), &Patch::Merge(patch))
        .await
}

/// `gpu-operator-validator discover --once` for `node` with `token`; its success and log.
async fn discover(node: &str, token: &str, root: &Path, dir: &Path) -> (bool, String) {
    agent(&["discover", "--once"], node, token, root, dir).await
}

/// `gpu-operator-validator <args>` as the agent on `node` with `token` (host root `root`, no
/// NVIDIA driver anywhere); its success and log.
async fn agent(args: &[&str], node: &str, token: &str, root: &Path, dir: &Path) -> (bool, String) {
    let kubeconfig = dir.join(format!("{node}.kubeconfig"));
    let mut config: Value = serde_yaml::from_str(
        &std::fs::read_to_string(gpu_operator_harness::access::kubeconfig_path().unwrap()).unwrap(),
    )
    .unwrap();
    for user in config["users"].as_array_mut().unwrap() {
        user["user"] = json!({ "token": token });
    }
    std::fs::write(&kubeconfig, serde_yaml::to_string(&config).unwrap()).unwrap();
    let output = tokio::process::Command::new(workspace_binary("gpu-operator-validator"))
        .args(args)
        .env_clear()
        .env("NODE_NAME", node)
        .env("HOST_ROOT_CTR_PATH", root)
        .env(
            "DRIVER_INSTALL_DIR_CTR_PATH",
            root.join("run/nvidia/driver"),
        )
        .env("KUBECONFIG", &kubeconfig)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(TIMEOUT, output)
        .await
        .unwrap()
        .unwrap();
    (
        output.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
    )
}

#[tokio::test]
#[allow(clippy::too_many_lines, reason = "one scenario, step by step")]
async fn node_agents_change_only_their_own_node_and_their_own_keys() {
    let admin = client().await.unwrap();
    let release = unique_name("gpu-operator-agents");
    let (a, b) = (format!("{release}-a"), format!("{release}-b"));
    let _cleanup = Cleanup {
        nodes: vec![a.clone(), b.clone()],
        release: release.clone(),
    };
    let nodes: Api<Node> = Api::all(admin.clone());
    for name in [&a, &b] {
        let mut node = Profile::H100.node(name);
        if let Some(labels) = node.metadata.labels.as_mut() {
            labels.retain(|k, _| !k.starts_with("feature.node.kubernetes.io/"));
        }
        nodes.create(&PostParams::default(), &node).await.unwrap();
    }
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": release}})).unwrap(),
        )
        .await
        .unwrap();

    // The validator's identity with the rules the operator renders for it; the discovery agent's
    // from the chart (without its DaemonSet: the agent runs here as a process).
    let rules = serde_json::to_value(
        gpu_operator_validator_operand::cluster_role()
            .rules
            .unwrap(),
    )
    .unwrap();
    let validator_rbac = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": VALIDATOR, "namespace": release}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": format!("{release}-validator")}, "rules": rules},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": format!("{release}-validator")},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": format!("{release}-validator")},
         "subjects": [{"kind": "ServiceAccount", "name": VALIDATOR, "namespace": release}]},
    ]});
    kubectl_apply(&validator_rbac.to_string()).unwrap();
    let discovery_rbac = render(&release, &release, &["templates/node-discovery.yaml"], &[])
        .unwrap()
        .split("\n---")
        .filter(|doc| !doc.contains("kind: DaemonSet"))
        .collect::<Vec<_>>()
        .join("\n---");
    kubectl_apply(&discovery_rbac).unwrap();
    let discovery = format!("{release}-node-discovery");

    let validator_on_a = pod_on(&admin, &release, VALIDATOR, &a).await;
    let discovery_on_a = pod_on(&admin, &release, &discovery, &a).await;
    let discovery_on_b = pod_on(&admin, &release, &discovery, &b).await;
    let validator = Api::<Node>::all(
        client_with_token(&token(&admin, &release, VALIDATOR, Some(&validator_on_a)).await)
            .await
            .unwrap(),
    );

    // Positive control: RBAC alone lets the validator's token write another node's conditions.
    set_condition(&validator, &b, "GPUDriverReady")
        .await
        .expect("RBAC allows nodes/status patch on any node");

    let policy = render(
        &release,
        &release,
        &["templates/node-agent-policy.yaml"],
        &[],
    )
    .unwrap();
    kubectl_apply(&policy).unwrap();
    // The policy takes effect once the API server's policy informer has it: wait until node B
    // is refused, then check everything else.
    let mut message = String::new();
    for _ in 0..60 {
        match set_condition(&validator, &b, "GPUDriverReady").await {
            Err(kube::Error::Api(status)) if status.code == 403 => {
                message = status.message;
                break;
            }
            _ => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
    assert!(
        message.contains(&format!(
            "may change only node {a}, where its pod runs, not node {b}"
        )),
        "{message}"
    );

    // On its own node: its condition, its annotation, its taint.
    let node = set_condition(&validator, &a, "GPUDriverReady")
        .await
        .unwrap();
    assert!(
        node.status
            .unwrap()
            .conditions
            .unwrap()
            .iter()
            .any(|c| c.type_ == "GPUDriverReady" && c.message.as_deref() == Some("e2e"))
    );
    merge(
        &validator,
        &a,
        json!({"metadata": {"annotations": {"nvidia.com/gpu-operator.validation": "GPUDriverReady=True/DriverValidated"}}}),
    )
    .await
    .unwrap();
    merge(
        &validator,
        &a,
        json!({"spec": {"taints": [{"key": "nvidia.com/gpu.not-ready", "effect": "NoSchedule"}]}}),
    )
    .await
    .unwrap();

    // The GPU health agent, the real binary with the token of the validator's pod (it runs in
    // that pod): on its own node it writes GPUHealthy (Unknown: there is no NVML here) and the
    // summary annotation; for another node it is refused.
    let health_dir = tempfile::tempdir().unwrap();
    let empty_root = tempfile::tempdir().unwrap();
    let on_a = token(&admin, &release, VALIDATOR, Some(&validator_on_a)).await;
    let health = ["health", "--once"];
    let (ok, log) = agent(&health, &b, &on_a, empty_root.path(), health_dir.path()).await;
    assert!(!ok && log.contains(&format!("not node {b}")), "{log}");
    let (ok, log) = agent(&health, &a, &on_a, empty_root.path(), health_dir.path()).await;
    assert!(ok, "{log}");
    let node = nodes.get_status(&a).await.unwrap();
    let healthy = node
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "GPUHealthy")
        .unwrap();
    assert_eq!(
        (healthy.status.as_str(), healthy.reason.as_deref()),
        ("Unknown", Some("HealthUnknown")),
        "{healthy:?}"
    );
    let summary = node.metadata.annotations.unwrap()["nvidia.com/gpu-operator.validation"].clone();
    assert!(
        summary.contains("GPUHealthy=False/HealthUnknown"),
        "{summary}"
    );
    merge(
        &validator,
        &a,
        json!({"spec": {"taints": [{"key": "nvidia.com/gpu.unhealthy", "effect": "NoSchedule"}]}}),
    )
    .await
    .unwrap();

    // Not what it does not own.
    let message = refused(
        set_condition(&validator, &a, "Ready").await,
        "kubelet's Ready",
    );
    assert!(
        message.contains("may change only the condition(s)"),
        "{message}"
    );
    let message = refused(
        merge(
            &validator,
            &a,
            json!({"metadata": {"labels": {"nvidia.com/gpu.present": "false"}}}),
        )
        .await,
        "a label",
    );
    assert!(
        message.contains("may not change label(s) nvidia.com/gpu.present"),
        "{message}"
    );
    let message = refused(
        merge(
            &validator,
            &a,
            json!({"spec": {"taints": [{"key": "other", "effect": "NoSchedule"}]}}),
        )
        .await,
        "another taint",
    );
    assert!(
        message.contains("may change only the taint(s)"),
        "{message}"
    );
    let message = refused(
        merge(&validator, &a, json!({"spec": {"unschedulable": true}})).await,
        "cordon",
    );
    assert!(message.contains("may not cordon"), "{message}");

    // A token not bound to a pod carries no node: refused everywhere.
    let unbound = Api::<Node>::all(
        client_with_token(&token(&admin, &release, VALIDATOR, None).await)
            .await
            .unwrap(),
    );
    let message = refused(
        set_condition(&unbound, &a, "GPUDriverReady").await,
        "an unbound token",
    );
    assert!(
        message.contains("only with the token of a pod on it"),
        "{message}"
    );

    // The real discovery agent: on its own node it labels; with a token of a pod on B it cannot
    // label A, and says why.
    let root = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let write = |path: &str, text: &str| {
        let path = root.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write("sys/bus/pci/devices/0000:00:05.0/vendor", "0x10de\n");
    write("sys/bus/pci/devices/0000:00:05.0/class", "0x030200\n");
    write("proc/sys/kernel/osrelease", "6.8.0-e2e\n");
    write("etc/os-release", "ID=ubuntu\nVERSION_ID=\"24.04\"\n");
    let on_b = token(&admin, &release, &discovery, Some(&discovery_on_b)).await;
    let (ok, log) = discover(&a, &on_b, root.path(), dir.path()).await;
    assert!(!ok && log.contains(&format!("not node {a}")), "{log}");
    let on_a = token(&admin, &release, &discovery, Some(&discovery_on_a)).await;
    let (ok, log) = discover(&a, &on_a, root.path(), dir.path()).await;
    assert!(ok, "{log}");
    let labels = nodes.get(&a).await.unwrap().metadata.labels.unwrap();
    assert_eq!(labels.get(KERNEL).map(String::as_str), Some("6.8.0-e2e"));
    let discoverer = Api::<Node>::all(client_with_token(&on_a).await.unwrap());
    let message = refused(
        merge(
            &discoverer,
            &a,
            json!({"metadata": {"labels": {"nvidia.com/gpu.present": "false"}}}),
        )
        .await,
        "a label the discovery agent does not own",
    );
    assert!(
        message.contains("may not change label(s) nvidia.com/gpu.present"),
        "{message}"
    );
}
