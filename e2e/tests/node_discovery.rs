//! GPU node discovery without NFD, against the real API server: the validator's `discover`
//! subcommand runs as a host process for a simulated node of its own, over a fake host tree
//! (the sysfs entry of a real H100: vendor 0x10de, class 0x030200, device 0x2330; a kernel
//! release; Ubuntu's os-release), authenticated as the ServiceAccount the chart gives the agent
//! (so it runs with exactly the chart's RBAC). It labels the node, a second run writes nothing,
//! a changed fact changes one label, a label another writer also set survives the agent letting go
//! of it, the agent writes nothing where NFD's labels are present, and a long-running agent makes
//! no write while nothing changes (its RSS is printed for the book's install page).
#![cfg(feature = "e2e")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::{collections::BTreeMap, path::Path, process::Stdio, time::Duration};

use gpu_operator_harness::{
    access::kubectl_ok,
    chart::{kubectl_apply, render, token_kubeconfig},
    client,
    fleet::Profile,
    operator::{workspace_binary, writes_by},
    unique_name, wait_until,
};
use k8s_openapi::{
    api::core::v1::{Namespace, Node},
    jiff::Timestamp,
};
use kube::{
    Api,
    api::{Patch, PatchParams, PostParams},
};
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(60);
const PRESENT: &str = "feature.node.kubernetes.io/pci-10de.present";
const PRESENT_3D: &str = "feature.node.kubernetes.io/pci-0302_10de.present";
const KERNEL: &str = "feature.node.kubernetes.io/kernel-version.full";
const OS_ID: &str = "feature.node.kubernetes.io/system-os_release.ID";
const OS_VERSION: &str = "feature.node.kubernetes.io/system-os_release.VERSION_ID";

fn write(root: &Path, path: &str, text: &str) {
    let path = root.join(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn h100(root: &Path) {
    let gpu = "sys/bus/pci/devices/0000:00:05.0";
    write(root, &format!("{gpu}/vendor"), "0x10de\n");
    write(root, &format!("{gpu}/class"), "0x030200\n");
    write(root, &format!("{gpu}/device"), "0x2330\n");
    write(root, "sys/bus/pci/devices/0000:00:00.0/vendor", "0x8086\n");
    write(root, "sys/bus/pci/devices/0000:00:00.0/class", "0x060000\n");
    write(root, "proc/sys/kernel/osrelease", "6.18.44-fc-v657-gpu\n");
    write(
        root,
        "etc/os-release",
        "PRETTY_NAME=\"Ubuntu 24.04.3 LTS\"\nNAME=\"Ubuntu\"\nVERSION_ID=\"24.04\"\nID=ubuntu\nID_LIKE=debian\n",
    );
}

struct Agent {
    nodes: Api<Node>,
    node: String,
    root: tempfile::TempDir,
    kubeconfig: std::path::PathBuf,
    user: String,
    namespace: String,
}

impl Agent {
    async fn labels(&self) -> BTreeMap<String, String> {
        let node = self.nodes.get(&self.node).await.unwrap();
        node.metadata.labels.unwrap_or_default()
    }

    fn command(&self, args: &[&str], interval: &str) -> tokio::process::Command {
        let binary = workspace_binary("gpu-operator-validator");
        assert!(
            binary.is_file(),
            "{} is not built: run the e2e tests with `cargo xtask e2e`, which builds it",
            binary.display()
        );
        let mut command = tokio::process::Command::new(binary);
        command
            .arg("discover")
            .args(args)
            .env_clear()
            .env("NODE_NAME", &self.node)
            .env("HOST_ROOT_CTR_PATH", self.root.path())
            .env("KUBECONFIG", &self.kubeconfig)
            .env("DISCOVERY_INTERVAL_SECONDS", interval)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        command
    }

    /// `discover --once`: its log; fails unless it exits 0.
    async fn once(&self) -> String {
        let output = tokio::time::timeout(TIMEOUT, self.command(&["--once"], "600").output())
            .await
            .expect("discover --once did not finish")
            .unwrap();
        let log = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(output.status.success(), "{log}");
        log
    }

    /// The agent's writes since `since`, read once the audit log shows a marker the admin
    /// makes after them (a ConfigMap of a unique name): every earlier request is logged by then.
    async fn writes_since(&self, since: Timestamp, marker: &str) -> Vec<String> {
        let marker = unique_name(marker);
        kubectl_ok(&["create", "configmap", &marker, "-n", &self.namespace]).unwrap();
        let admin_sees = wait_until("the marker in the audit log", TIMEOUT, || async {
            let log = std::fs::read_to_string(gpu_operator_harness::operator::audit_log()?)?;
            Ok(log.contains(&marker).then_some(()))
        });
        admin_sees.await.unwrap();
        writes_by(&self.user, since)
            .unwrap()
            .into_iter()
            .map(|w| format!("{} {} {}", w.verb, w.resource, w.name))
            .collect()
    }
}

/// Deletes the test's node, namespace and cluster RBAC when dropped, even after a failed step
/// (a left-over simulated node would upset the tests that look at the whole fleet).
struct Cleanup {
    node: String,
    release: String,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = kubectl_ok(&["delete", "node", &self.node, "--ignore-not-found"]);
        let _ = kubectl_ok(&[
            "delete",
            "namespace",
            &self.release,
            "--ignore-not-found",
            "--wait=false",
        ]);
        let rbac = format!("{}-node-discovery", self.release);
        for kind in ["clusterrolebinding", "clusterrole"] {
            let _ = kubectl_ok(&["delete", kind, &rbac, "--ignore-not-found"]);
        }
    }
}

#[tokio::test]
#[allow(clippy::too_many_lines, reason = "one scenario, step by step")]
async fn the_discovery_agent_labels_its_node_only_on_change_and_yields_to_nfd() {
    let client = client().await.unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    let node = unique_name("discovery");
    let mut simulated = Profile::H100.node(&node);
    // A node NFD never saw: none of its labels.
    if let Some(labels) = simulated.metadata.labels.as_mut() {
        labels.retain(|k, _| !k.starts_with("feature.node.kubernetes.io/"));
    }
    let release = unique_name("gpu-operator-discovery");
    let _cleanup = Cleanup {
        node: node.clone(),
        release: release.clone(),
    };
    nodes
        .create(&PostParams::default(), &simulated)
        .await
        .unwrap();

    // The chart's identity for the agent: its ServiceAccount, ClusterRole and binding.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": release}})).unwrap(),
        )
        .await
        .unwrap();
    let rendered = render(&release, &release, &["templates/node-discovery.yaml"], &[]).unwrap();
    // Not the DaemonSet: kwok runs no containers; the agent runs here as a process instead.
    let rbac = rendered
        .split("\n---")
        .filter(|doc| !doc.contains("kind: DaemonSet"))
        .collect::<Vec<_>>()
        .join("\n---");
    kubectl_apply(&rbac).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (kubeconfig, user) = token_kubeconfig(
        &client,
        &release,
        &format!("{release}-node-discovery"),
        dir.path(),
    )
    .await
    .unwrap();
    let agent = Agent {
        nodes: nodes.clone(),
        node: node.clone(),
        root: tempfile::tempdir().unwrap(),
        kubeconfig,
        user,
        namespace: release.clone(),
    };
    h100(agent.root.path());

    // First run: the labels appear, in one write.
    let start = Timestamp::now();
    let log = agent.once().await;
    assert!(log.contains("labels applied"), "{log}");
    let labels = agent.labels().await;
    for (key, value) in [
        (PRESENT, "true"),
        (PRESENT_3D, "true"),
        (KERNEL, "6.18.44-fc-v657-gpu"),
        (OS_ID, "ubuntu"),
        (OS_VERSION, "24.04"),
    ] {
        assert_eq!(
            labels.get(key).map(String::as_str),
            Some(value),
            "{key}: {labels:?}"
        );
    }
    let first = agent.writes_since(start, "first").await;
    assert_eq!(first, [format!("patch nodes {node}")], "one write");

    // Second run: nothing changed, nothing written.
    let second_start = Timestamp::now();
    let log = agent.once().await;
    assert!(log.contains("labels up to date"), "{log}");
    assert_eq!(
        agent.writes_since(second_start, "second").await,
        Vec::<String>::new()
    );

    // A kernel upgrade: one label changes, in one write.
    write(
        agent.root.path(),
        "proc/sys/kernel/osrelease",
        "6.18.50-fc-v700-gpu\n",
    );
    let upgrade = Timestamp::now();
    agent.once().await;
    assert_eq!(agent.labels().await[KERNEL], "6.18.50-fc-v700-gpu");
    assert_eq!(agent.writes_since(upgrade, "upgrade").await.len(), 1);

    // Another writer also sets the 3D-controller label; then the GPU goes away. The agent lets go
    // of its GPU labels: the one only it set disappears, the shared one stays.
    // (Server-side apply under its own field manager, so the API server records it as an owner;
    // a label command that changes nothing would record nothing.)
    let other = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node, "labels": {PRESENT_3D: "true"}}});
    nodes
        .patch(
            &node,
            &PatchParams::apply("e2e-other-writer"),
            &Patch::Apply(&other),
        )
        .await
        .unwrap();
    std::fs::remove_dir_all(agent.root.path().join("sys/bus/pci/devices/0000:00:05.0")).unwrap();
    agent.once().await;
    let labels = agent.labels().await;
    assert!(!labels.contains_key(PRESENT), "{labels:?}");
    assert_eq!(
        labels.get(PRESENT_3D).map(String::as_str),
        Some("true"),
        "removed another writer's label"
    );
    assert_eq!(labels[OS_ID], "ubuntu");
    h100(agent.root.path());
    agent.once().await;

    // NFD labels the node (one of its many labels the agent never writes): the agent writes nothing,
    // even when a fact changes.
    kubectl_ok(&[
        "label",
        "node",
        &node,
        "feature.node.kubernetes.io/cpu-cpuid.AVX2=true",
    ])
    .unwrap();
    write(
        agent.root.path(),
        "etc/os-release",
        "ID=ubuntu\nVERSION_ID=\"26.04\"\n",
    );
    let nfd = Timestamp::now();
    let log = agent.once().await;
    assert!(
        log.contains("NFD is installed") && log.contains("cpu-cpuid.AVX2"),
        "{log}"
    );
    assert_eq!(agent.labels().await[OS_VERSION], "24.04");
    assert_eq!(agent.writes_since(nfd, "nfd").await, Vec::<String>::new());
    kubectl_ok(&[
        "label",
        "node",
        &node,
        "feature.node.kubernetes.io/cpu-cpuid.AVX2-",
    ])
    .unwrap();
    write(
        agent.root.path(),
        "etc/os-release",
        "ID=ubuntu\nVERSION_ID=\"24.04\"\n",
    );

    // Long-running, one pass a second: no write while nothing changes; then a change is written.
    let mut running = agent.command(&[], "1").spawn().unwrap();
    let pid = running.id().unwrap();
    let quiet = Timestamp::now();
    tokio::time::sleep(Duration::from_secs(20)).await;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let memory: Vec<&str> = status
        .lines()
        .filter(|l| l.starts_with("VmRSS") || l.starts_with("VmHWM"))
        .collect();
    eprintln!("discovery agent after 20 passes: {memory:?}");
    write(
        agent.root.path(),
        "etc/os-release",
        "ID=ubuntu\nVERSION_ID=\"24.10\"\n",
    );
    wait_until("the running agent to write the change", TIMEOUT, || async {
        Ok(
            (agent.labels().await.get(OS_VERSION).map(String::as_str) == Some("24.10"))
                .then_some(()),
        )
    })
    .await
    .unwrap();
    running.kill().await.unwrap();
    let writes = agent.writes_since(quiet, "quiet").await;
    assert_eq!(writes.len(), 1, "only the change is written: {writes:?}");
}
