//! The control-plane components: how each is started on 127.0.0.1 and how we know it is ready.

use std::{
    io::{Read as _, Write as _},
    net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream},
    path::PathBuf,
    process::Command,
    time::Duration,
};

use super::layout::{Layout, ports};

/// One process of the local cluster, in start order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Component {
    /// The key-value store.
    Etcd,
    /// The API server (RBAC on).
    Apiserver,
    /// Controllers: DaemonSet, garbage collector, namespace, service account, …
    ControllerManager,
    /// Binds pods to nodes.
    Scheduler,
    /// Simulated kubelets for the fake GPU nodes.
    Kwok,
}

/// How a component is checked for readiness after start.
pub enum Readiness {
    /// A plain-HTTP GET on 127.0.0.1 returns 200.
    Http(u16, &'static str),
    /// The API server's `/readyz` answers `ok` through the admin kubeconfig.
    ApiserverReadyz,
    /// The controller-manager has created the `default` ServiceAccount (it is really working).
    DefaultServiceAccount,
    /// Something accepts TCP connections on this port.
    Listening(u16),
}

/// Audit policy of the API server: metadata of every request of the throttled chaos scenario's
/// ServiceAccount (`chaos::throttled`, to count the requests API Priority and Fairness refused),
/// of every mutating request, and of ServiceAccounts' LISTs (a relist after a restart shows
/// there), nothing else. Tests count a client's writes and lists from this log, on the server's
/// side.
pub const AUDIT_POLICY: &str = "\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  users: [\"system:serviceaccount:gpu-operator:gpu-operator-throttled\"]
- level: Metadata
  verbs: [create, update, patch, delete, deletecollection]
- level: Metadata
  verbs: [list]
  userGroups: [\"system:serviceaccounts\"]
- level: None
";

impl Component {
    /// Every component, in start order.
    pub const ALL: [Self; 5] = [
        Self::Etcd,
        Self::Apiserver,
        Self::ControllerManager,
        Self::Scheduler,
        Self::Kwok,
    ];

    /// Name used for its log and pid files.
    pub fn name(self) -> &'static str {
        match self {
            Self::Etcd => "etcd",
            Self::Apiserver => "kube-apiserver",
            Self::ControllerManager => "kube-controller-manager",
            Self::Scheduler => "kube-scheduler",
            Self::Kwok => "kwok",
        }
    }

    /// The loopback ports it binds.
    pub fn ports(self, layout: &Layout) -> Vec<u16> {
        let bases: &[u16] = match self {
            Self::Etcd => &[ports::ETCD_CLIENT, ports::ETCD_PEER],
            Self::Apiserver => &[ports::APISERVER],
            Self::ControllerManager => &[ports::CONTROLLER_MANAGER],
            Self::Scheduler => &[ports::SCHEDULER],
            Self::Kwok => &[ports::KWOK],
        };
        bases.iter().map(|&base| layout.port(base)).collect()
    }

    /// How to tell it is ready.
    pub fn readiness(self, layout: &Layout) -> Readiness {
        match self {
            Self::Etcd => Readiness::Http(layout.port(ports::ETCD_CLIENT), "/health"),
            Self::Apiserver => Readiness::ApiserverReadyz,
            Self::ControllerManager => Readiness::DefaultServiceAccount,
            Self::Scheduler => Readiness::Listening(layout.port(ports::SCHEDULER)),
            Self::Kwok => Readiness::Http(layout.port(ports::KWOK), "/healthz"),
        }
    }

    /// The command line that starts it.
    pub fn command(self, layout: &Layout) -> Command {
        let pki = |file: &str| layout.pki().join(file).display().to_string();
        let kubeconfig = layout.kubeconfig().display().to_string();
        let k8s = |name: &str| layout.kubernetes_bin().join(name);
        let (program, args): (PathBuf, Vec<String>) = match self {
            Self::Etcd => (layout.etcd_bin().join("etcd"), etcd_args(layout)),
            Self::Apiserver => (k8s("kube-apiserver"), apiserver_args(layout)),
            Self::ControllerManager => (
                k8s("kube-controller-manager"),
                vec![
                    format!("--kubeconfig={kubeconfig}"),
                    "--leader-elect=false".into(),
                    "--bind-address=127.0.0.1".into(),
                    format!("--secure-port={}", layout.port(ports::CONTROLLER_MANAGER)),
                    format!("--root-ca-file={}", pki("ca.crt")),
                    format!("--service-account-private-key-file={}", pki("sa.key")),
                    // kwok renews no node leases (too many writes at 5,000 nodes) and posts node
                    // status every 10–20 minutes; a long grace period keeps the nodes Ready while
                    // the node-lifecycle controller still lifts the not-ready taint of new nodes.
                    "--node-monitor-grace-period=3600s".into(),
                    // Defaults (20/30) make a 5,000-node DaemonSet rollout take minutes.
                    "--kube-api-qps=200".into(),
                    "--kube-api-burst=400".into(),
                ],
            ),
            Self::Scheduler => (
                k8s("kube-scheduler"),
                vec![
                    format!("--kubeconfig={kubeconfig}"),
                    "--leader-elect=false".into(),
                    "--bind-address=127.0.0.1".into(),
                    format!("--secure-port={}", layout.port(ports::SCHEDULER)),
                ],
            ),
            Self::Kwok => (
                layout.kwok_bin().join("kwok"),
                vec![
                    format!("--kubeconfig={kubeconfig}"),
                    format!(
                        "--config={}",
                        layout.kwok_bin().join("stages.yaml").display()
                    ),
                    "--manage-all-nodes=false".into(),
                    format!(
                        "--manage-nodes-with-label-selector={}={}",
                        gpu_operator_harness::fleet::KWOK_LABEL.0,
                        gpu_operator_harness::fleet::KWOK_LABEL.1
                    ),
                    // No node leases: cheaper at 5,000 nodes (see the controller-manager's grace period).
                    "--node-lease-duration-seconds=0".into(),
                    format!("--server-address=127.0.0.1:{}", layout.port(ports::KWOK)),
                    "--cidr=10.244.0.0/16".into(),
                ],
            ),
        };
        let mut command = Command::new(program);
        command.args(args);
        if self == Self::Kwok {
            // Keep kwok away from a user's ~/.kwok configuration.
            command.env("KWOK_WORKDIR", layout.run_dir().join("kwok"));
        }
        command
    }
}

fn etcd_args(layout: &Layout) -> Vec<String> {
    let client = format!("http://127.0.0.1:{}", layout.port(ports::ETCD_CLIENT));
    let peer = format!("http://127.0.0.1:{}", layout.port(ports::ETCD_PEER));
    vec![
        "--name=e2e".into(),
        format!("--data-dir={}", layout.etcd_data().display()),
        format!("--listen-client-urls={client}"),
        format!("--advertise-client-urls={client}"),
        format!("--listen-peer-urls={peer}"),
        format!("--initial-advertise-peer-urls={peer}"),
        format!("--initial-cluster=e2e={peer}"),
        "--listen-metrics-urls=".into(),
        "--unsafe-no-fsync".into(),
        "--quota-backend-bytes=8589934592".into(),
        "--auto-compaction-retention=1".into(),
        "--log-level=warn".into(),
    ]
}

fn apiserver_args(layout: &Layout) -> Vec<String> {
    let pki = |file: &str| layout.pki().join(file).display().to_string();
    vec![
        format!(
            "--etcd-servers=http://127.0.0.1:{}",
            layout.port(ports::ETCD_CLIENT)
        ),
        "--bind-address=127.0.0.1".into(),
        "--advertise-address=127.0.0.1".into(),
        format!("--secure-port={}", layout.port(ports::APISERVER)),
        // Loopback cannot be the `kubernetes` Service endpoint; nothing in-cluster needs it.
        "--endpoint-reconciler-type=none".into(),
        format!("--tls-cert-file={}", pki("apiserver.crt")),
        format!("--tls-private-key-file={}", pki("apiserver.key")),
        format!("--client-ca-file={}", pki("ca.crt")),
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
        format!("--service-account-key-file={}", pki("sa.pub")),
        format!("--service-account-signing-key-file={}", pki("sa.key")),
        "--service-cluster-ip-range=10.96.0.0/16".into(),
        "--authorization-mode=Node,RBAC".into(),
        "--allow-privileged=true".into(),
        "--profiling=false".into(),
        format!(
            "--audit-policy-file={}",
            layout.run_dir().join("audit-policy.yaml").display()
        ),
        format!("--audit-log-path={}", layout.log("audit").display()),
        // `kubectl logs/exec` on the real node: the kubelet by its InternalIP (127.0.0.1), with
        // a serving certificate of our CA, and the admin certificate as the API server's client.
        "--kubelet-preferred-address-types=InternalIP".into(),
        format!("--kubelet-certificate-authority={}", pki("ca.crt")),
        format!("--kubelet-client-certificate={}", pki("admin.crt")),
        format!("--kubelet-client-key={}", pki("admin.key")),
        "--audit-log-format=json".into(),
        "--audit-log-mode=batch".into(),
        "--audit-log-batch-max-wait=1s".into(),
    ]
}

/// Whether nothing listens on `port` of 127.0.0.1.
pub fn port_is_free(port: u16) -> bool {
    TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)).is_ok()
}

/// Whether something accepts connections on `port` of 127.0.0.1.
pub fn port_is_listening(port: u16) -> bool {
    TcpStream::connect_timeout(
        &SocketAddrV4::new(Ipv4Addr::LOCALHOST, port).into(),
        Duration::from_millis(500),
    )
    .is_ok()
}

/// A plain HTTP/1.0 GET on 127.0.0.1; true when the status is 200.
pub fn http_ok(port: u16, path: &str) -> bool {
    let Ok(mut stream) = TcpStream::connect_timeout(
        &SocketAddrV4::new(Ipv4Addr::LOCALHOST, port).into(),
        Duration::from_millis(500),
    ) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").is_err() {
        return false;
    }
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response.starts_with("HTTP/1.0 200") || response.starts_with("HTTP/1.1 200")
}
