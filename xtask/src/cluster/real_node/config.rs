//! The real node's configuration files: containerd's, the CNI network's and the kubelet's, with
//! the settings this kind of machine needs (../shared/reference/harness.md, "A real node on this
//! machine"): cgroup v1 with the cgroupfs driver, `restrict_oom_score_adj` (the machine refuses
//! to lower `oom_score_adj`), a locally built pause image, Debian's CNI plugins.

use std::path::PathBuf;

use super::super::layout::{Layout, ports};

/// Where Debian's `containernetworking-plugins` installs the plugins.
pub const CNI_BIN_DIR: &str = "/usr/lib/cni";

/// The paths and names of one real node (per cluster: they carry the port offset).
#[derive(Debug, Clone)]
pub struct Node {
    /// Base directory (`run/node`).
    pub dir: PathBuf,
    /// containerd's gRPC socket.
    pub socket: PathBuf,
    /// The Linux bridge of the pod network.
    pub bridge: String,
    /// The pod subnet (`10.200.N.0/24`) and its gateway (the bridge's address).
    pub subnet: String,
    /// The bridge's address, without prefix length.
    pub gateway: String,
    /// The iptables chain that sends the `kubernetes` Service to the API server.
    pub chain: String,
    /// The cgroup (in every hierarchy) the kubelet puts its pods under.
    pub cgroup_root: String,
    /// The API server's port on 127.0.0.1.
    pub apiserver_port: u16,
    /// The kubelet's ports on 127.0.0.1 (API, healthz).
    pub kubelet_port: u16,
    /// See [`Node::kubelet_port`].
    pub healthz_port: u16,
}

impl Node {
    /// The node of the cluster `layout` describes.
    pub fn of(layout: &Layout) -> Self {
        let offset = layout.port_offset();
        let dir = layout.real_node_dir();
        // Unique for offsets below 256; `prepare` refuses a subnet another cluster already routes.
        let third = offset % 256;
        Self {
            socket: dir.join("containerd/containerd.sock"),
            dir,
            bridge: format!("gpuop-e2e{offset}"),
            subnet: format!("10.200.{third}.0/24"),
            gateway: format!("10.200.{third}.1"),
            chain: format!("GPUOP-E2E-{offset}"),
            cgroup_root: format!("/gpu-operator-e2e-{offset}"),
            apiserver_port: layout.port(ports::APISERVER),
            kubelet_port: layout.port(ports::KUBELET),
            healthz_port: layout.port(ports::KUBELET_HEALTHZ),
        }
    }

    fn path(&self, rest: &str) -> String {
        self.dir.join(rest).display().to_string()
    }

    /// containerd's root (images, snapshots) and state (task bundles) directories.
    pub fn containerd_dirs(&self) -> [PathBuf; 2] {
        [
            self.dir.join("containerd/root"),
            self.dir.join("containerd/state"),
        ]
    }

    /// The kubelet's root directory (pod volumes are mounted below it).
    pub fn kubelet_root(&self) -> PathBuf {
        self.dir.join("kubelet")
    }

    /// Where the kubelet writes container logs.
    pub fn pod_logs(&self) -> PathBuf {
        self.dir.join("pod-logs")
    }

    /// `containerd.toml`.
    pub fn containerd_toml(&self, pause_image: &str) -> String {
        let [root, state] = self.containerd_dirs();
        format!(
            r#"version = 2
root = "{root}"
state = "{state}"
oom_score = 0
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = "{socket}"
[ttrpc]
  address = ""
[debug]
  address = ""
[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "{root}/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause_image}"
  # This machine refuses to lower oom_score_adj; without this every sandbox fails with
  # "can't get final child's PID from pipe: EOF".
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
    # The handler of the `nvidia` RuntimeClass operand pods use. On a GPU node the container
    # toolkit adds it (nvidia-container-runtime, which runs containers that ask for no GPU as runc
    # would); this node has no GPU, so plain runc stands in.
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_BIN_DIR}"
    conf_dir = "{cni}"
"#,
            root = root.display(),
            state = state.display(),
            socket = self.socket.display(),
            cni = self.path("cni/net.d"),
        )
    }

    /// The CNI network: a bridge with host-local addresses, the bridge being the pods' gateway.
    pub fn cni_conflist(&self) -> String {
        serde_json::json!({
            "cniVersion": "0.4.0",
            "name": "gpu-operator-e2e",
            "plugins": [{
                "type": "bridge",
                "bridge": self.bridge,
                "isGateway": true,
                "ipMasq": false,
                "hairpinMode": true,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{ "subnet": self.subnet, "gateway": self.gateway }]],
                    "routes": [{ "dst": "0.0.0.0/0" }],
                    "dataDir": self.path("cni/ipam"),
                },
            }],
        })
        .to_string()
    }

    /// The KubeletConfiguration.
    pub fn kubelet_config(&self, pki: &std::path::Path) -> String {
        let pki = |file: &str| pki.join(file).display().to_string();
        format!(
            r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# Kubelet 1.35+ refuses cgroup v1 (this machine's) unless told otherwise (KEP-5573).
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: {cgroup_root}
containerRuntimeEndpoint: unix://{socket}
failSwapOn: false
address: {address}
port: {port}
healthzBindAddress: 127.0.0.1
healthzPort: {healthz}
readOnlyPort: 0
tlsCertFile: {tls_cert}
tlsPrivateKeyFile: {tls_key}
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: {ca}
authorization:
  mode: Webhook
podCIDR: {subnet}
clusterDomain: cluster.local
podLogsDir: {logs}
# A shared machine with a full disk must not evict the test's pods or collect its imported images.
evictionHard:
  memory.available: 50Mi
  nodefs.available: "1%"
  nodefs.inodesFree: "1%"
  imagefs.available: "1%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
registerNode: true
"#,
            cgroup_root = self.cgroup_root,
            socket = self.socket.display(),
            address = self.gateway,
            port = self.kubelet_port,
            healthz = self.healthz_port,
            tls_cert = pki("kubelet.crt"),
            tls_key = pki("kubelet.key"),
            ca = pki("ca.crt"),
            subnet = self.subnet,
            logs = self.pod_logs().display(),
        )
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    /// Two clusters side by side (different port offsets) never share a bridge, chain, subnet,
    /// cgroup or kubelet port, and every name fits the kernel's limits (15-byte interface names,
    /// 28-byte iptables chains, 108-byte socket paths).
    #[test]
    fn names_differ_by_port_offset_and_fit_the_kernel_limits() {
        let node = |offset: u16| {
            let root = format!("/root/.cache/gpu-operator-e2e-{offset}");
            Node::of(&Layout::for_tests(&root, offset))
        };
        let (a, b) = (node(0), node(210));
        assert_ne!(a.bridge, b.bridge);
        assert_ne!(a.chain, b.chain);
        assert_ne!(a.subnet, b.subnet);
        assert_ne!(a.cgroup_root, b.cgroup_root);
        assert_ne!(a.kubelet_port, b.kubelet_port);
        for node in [a, b, node(50000)] {
            assert!(node.bridge.len() <= 15, "{}", node.bridge);
            assert!(node.chain.len() <= 28, "{}", node.chain);
            assert!(
                node.socket.as_os_str().len() < 108,
                "{}",
                node.socket.display()
            );
        }
    }
}
