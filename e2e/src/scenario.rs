//! Helpers of the operator's end-to-end scenario: its environment (namespace, ServiceAccount
//! kubeconfig, the operator process) and waits on ClusterPolicies, DaemonSets and pods.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::missing_panics_doc,
    reason = "test support: a step that cannot be taken fails the test that takes it"
)]

use std::{collections::BTreeMap, time::Duration};

use gpu_operator_api::{ClusterPolicy, State, conditions};
use gpu_operator_harness::{
    access::kubectl_ok,
    chart::{operator_kubeconfig, remove_operator_rbac},
    client,
    crd::ensure_crd,
    fleet::{KWOK_LABEL, NFD_NVIDIA_PCI},
    operator::Operator,
    unique_name, wait_until,
};
use k8s_openapi::api::{
    apps::v1::DaemonSet,
    core::v1::{Event, Namespace, Node, Pod},
};
use kube::{
    Api, ResourceExt as _,
    api::{ListParams, PostParams},
};
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// How long a scenario waits for one step.
pub const TIMEOUT: Duration = Duration::from_secs(120);
/// How long the operator may take to exit after SIGTERM, whatever it is doing
/// (docs/reliability.md, "Shutdown").
pub const SHUTDOWN_BOUND: Duration = Duration::from_secs(5);
/// The device plugin's DaemonSet.
pub const PLUGIN: &str = "nvidia-device-plugin-daemonset";
/// The validator's DaemonSet.
pub const VALIDATOR: &str = "nvidia-operator-validator";
/// The operator's image environment (shared with the bench).
pub use gpu_operator_harness::operator::IMAGES;

/// One scenario's environment: its namespace, and the chart's RBAC for the operator in it.
pub struct Env {
    /// A client with the test's (admin) credentials.
    pub client: kube::Client,
    /// The scenario's operator namespace.
    pub namespace: String,
    /// The kubeconfig of the operator's ServiceAccount token.
    pub kubeconfig: std::path::PathBuf,
    /// The operator's user name, as the audit log names it.
    pub user: String,
    /// The scenario's scratch directory (operator log, kubeconfig).
    pub dir: std::path::PathBuf,
}

impl Env {
    /// Starts the operator as a host process in this environment with `env`.
    pub fn start(&self, env: &[(&str, &str)]) -> Operator {
        Operator::start(
            &self.kubeconfig,
            &self.namespace,
            env,
            &self.dir.join("operator.log"),
        )
        .unwrap()
    }
    /// The DaemonSets of the namespace.
    pub fn daemonsets(&self) -> Api<DaemonSet> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }
    /// The pods of the namespace.
    pub fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }
    /// The ClusterPolicies.
    pub fn policies(&self) -> Api<ClusterPolicy> {
        Api::all(self.client.clone())
    }
}

/// The names of the GPU nodes (NFD's NVIDIA PCI label) among `nodes`.
pub fn gpu_nodes(nodes: &[Node]) -> Vec<String> {
    nodes
        .iter()
        .filter(|n| n.labels().get(NFD_NVIDIA_PCI).is_some_and(|v| v == "true"))
        .map(kube::ResourceExt::name_any)
        .collect()
}

/// The kwok nodes of the simulated fleet.
pub async fn simulated_nodes(client: &kube::Client) -> Vec<Node> {
    let selector = format!("{}={}", KWOK_LABEL.0, KWOK_LABEL.1);
    Api::<Node>::all(client.clone())
        .list(&ListParams::default().labels(&selector))
        .await
        .unwrap()
        .items
}

/// Condition `type_` of `policy`, if it has one.
pub fn condition<'a>(
    policy: &'a ClusterPolicy,
    type_: &str,
) -> Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    policy
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// Waits until `check` accepts the policy, printing its status on timeout.
pub async fn wait_policy(
    env: &Env,
    name: &str,
    what: &str,
    check: impl Fn(&ClusterPolicy) -> bool,
) -> ClusterPolicy {
    let result = wait_until(what, TIMEOUT, || async {
        let policy = env.policies().get(name).await?;
        Ok(check(&policy).then_some(policy))
    })
    .await;
    match result {
        Ok(policy) => policy,
        Err(error) => {
            let policy = env.policies().get(name).await.unwrap();
            panic!("{error}; status: {:#?}", policy.status);
        }
    }
}

/// Whether `policy` is `ready` with its `Ready` condition reconciled.
pub fn is_ready(policy: &ClusterPolicy) -> bool {
    policy
        .status
        .as_ref()
        .is_some_and(|s| s.state == State::Ready)
        && condition(policy, conditions::READY)
            .is_some_and(|c| c.status == "True" && c.reason == conditions::reason::RECONCILED)
}

/// The pods labelled `app=<app>` in `namespace`, not being deleted.
pub async fn live_pods(env: &Env, namespace: &str, app: &str) -> Vec<Pod> {
    Api::<Pod>::namespaced(env.client.clone(), namespace)
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect()
}

/// Pod UIDs by node of a DaemonSet.
pub async fn pods_of(env: &Env, app: &str) -> BTreeMap<String, String> {
    live_pods(env, &env.namespace, app)
        .await
        .iter()
        .filter_map(|p| Some((p.spec.as_ref()?.node_name.clone()?, p.uid()?)))
        .collect()
}

/// Waits for an Event with `reason` about the object named `object` whose message mentions
/// `mentions`, and returns it.
pub async fn wait_event(env: &Env, object: &str, reason: &str, mentions: &str) -> Event {
    let events: Api<Event> = Api::all(env.client.clone());
    let selector = format!("involvedObject.name={object},reason={reason}");
    wait_until(
        &format!("an Event {reason} on {object} mentioning {mentions}"),
        TIMEOUT,
        || async {
            let list = events
                .list(&ListParams::default().fields(&selector))
                .await?;
            Ok(list
                .items
                .into_iter()
                .find(|e| e.message.as_deref().is_some_and(|m| m.contains(mentions))))
        },
    )
    .await
    .unwrap()
}

/// Waits until DaemonSet `name` is fully Ready (on at least one node) and, if given, has a pod on
/// `node`.
pub async fn wait_ds_ready(env: &Env, name: &str, node: Option<&str>) {
    wait_until(&format!("{name} to be Ready"), TIMEOUT, || async {
        let Some(ds) = env.daemonsets().get_opt(name).await? else {
            return Ok(None);
        };
        let status = ds.status.unwrap_or_default();
        let ready = status.desired_number_scheduled > 0
            && status.number_ready == status.desired_number_scheduled;
        let covered = match node {
            Some(node) => pods_of(env, name).await.contains_key(node),
            None => true,
        };
        Ok((ready && covered).then_some(()))
    })
    .await
    .unwrap();
}

/// Label of the objects a scenario makes only for itself; [`Cleanup`] deletes them.
pub const TEMPORARY: &str = "e2e.gpu-operator/temporary";
/// RuntimeClass `nvidia`, which operand pods name, made where the cluster lacks it (pods naming a
/// missing RuntimeClass are refused; the toolkit's reconciler owns it once it runs).
const RUNTIME_CLASS: &str = "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata:\n  name: nvidia\n  labels: {e2e.gpu-operator/temporary: \"true\"}\nhandler: nvidia\n";

/// Makes RuntimeClass `nvidia` (labelled [`TEMPORARY`]`=true`) unless the cluster has one.
pub fn ensure_runtime_class() {
    if kubectl_ok(&["get", "runtimeclass", "nvidia"]).is_err() {
        let file = std::env::temp_dir().join(unique_name("runtimeclass"));
        std::fs::write(&file, RUNTIME_CLASS).unwrap();
        let _ = kubectl_ok(&["create", "-f", file.to_str().unwrap()]);
    }
}

/// A new scenario environment: the CRD, RuntimeClass `nvidia`, a fresh namespace and the
/// operator's kubeconfig with exactly the chart's RBAC.
pub async fn setup() -> Env {
    let client = client().await.unwrap();
    ensure_crd().await.unwrap();
    ensure_runtime_class();
    let namespace = unique_name("gpu-operator");
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": namespace}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let dir = std::env::temp_dir().join(&namespace);
    std::fs::create_dir_all(&dir).unwrap();
    // Exactly the chart's RBAC: its ServiceAccount, Role and ClusterRole, release named after the
    // namespace.
    let (kubeconfig, user) = operator_kubeconfig(&client, &namespace, &namespace, &dir)
        .await
        .unwrap();
    Env {
        client,
        namespace,
        kubeconfig,
        user,
        dir,
    }
}

/// Deletes what the scenario created when dropped, also when a step panics: the ClusterPolicies
/// `policies`, the operator namespace and the chart's cluster-scoped RBAC.
pub struct Cleanup {
    /// The operator namespace.
    pub namespace: String,
    /// ClusterPolicies the scenario may have created.
    pub policies: Vec<String>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = kubectl_ok(&[
            "delete",
            "runtimeclass",
            "-l",
            TEMPORARY,
            "--ignore-not-found",
        ]);
        for policy in &self.policies {
            let _ = kubectl_ok(&[
                "delete",
                "clusterpolicy",
                policy,
                "--ignore-not-found",
                "--wait=false",
            ]);
        }
        remove_operator_rbac(&self.namespace);
        let _ = kubectl_ok(&[
            "delete",
            "namespace",
            &self.namespace,
            "--ignore-not-found",
            "--wait=false",
        ]);
    }
}

/// Waits until nothing the operator writes (the ClusterPolicy, our DaemonSets) has changed for
/// `quiet` (longer than its debounce), so a restart finds it converged rather than mid-write.
pub async fn wait_settled(env: &Env, name: &str, quiet: Duration) {
    let versions = || async {
        let policy = env.policies().get(name).await.unwrap();
        let daemonsets = env.daemonsets().list(&ListParams::default()).await.unwrap();
        let mut versions: Vec<Option<String>> = daemonsets
            .items
            .iter()
            .map(kube::ResourceExt::resource_version)
            .collect();
        versions.push(policy.resource_version());
        versions
    };
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    let mut last = versions().await;
    let mut since = tokio::time::Instant::now();
    while since.elapsed() < quiet {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the operator kept writing for {TIMEOUT:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = versions().await;
        if now != last {
            last = now;
            since = tokio::time::Instant::now();
        }
    }
}

/// A plain HTTP GET that reports whether the answer was 200.
pub async fn probe(url: &str) -> bool {
    get(url).await.is_some()
}

/// The body of a plain HTTP GET of `url`, when the answer was 200.
pub async fn get(url: &str) -> Option<String> {
    let rest = url.strip_prefix("http://")?;
    let (host, path) = rest.split_once('/')?;
    let mut stream = tokio::net::TcpStream::connect(host).await.ok()?;
    stream
        .write_all(format!("GET /{path} HTTP/1.0\r\nHost: {host}\r\n\r\n").as_bytes())
        .await
        .ok()?;
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response).await;
    let ok = response.starts_with("HTTP/1.1 200") || response.starts_with("HTTP/1.0 200");
    let (_, body) = response.split_once("\r\n\r\n")?;
    ok.then(|| body.to_owned())
}
