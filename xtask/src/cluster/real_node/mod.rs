//! `cluster up --real-node`: one node run by a real kubelet (built from the control plane's
//! module) with Debian's containerd, runc and CNI plugins, beside the kwok fleet. Our image, the
//! stand-in for NVIDIA's validator image and the pause image are imported into its containerd,
//! so no registry is needed. The node is tainted [`TAINT`]: only pods that tolerate it (the
//! real-node tests') run there, so tests written for kwok keep their fleet.
//!
//! Pods reach the API server the way in-cluster clients expect, through the `kubernetes`
//! Service (10.96.0.1:443, `KUBERNETES_SERVICE_HOST`): with no kube-proxy here, one iptables DNAT
//! rule on the pod bridge does what kube-proxy would, to the API server on 127.0.0.1
//! (`route_localnet` on the bridge), whose certificate is valid for 10.96.0.1.

mod config;
mod host;
pub mod teardown;

use std::{
    fs,
    process::Command,
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};
use k8s_openapi::api::core::v1::Node as KubeNode;
use kube::api::{Api, Patch, PatchParams};

pub use config::Node;
pub use host::{ensure_packages, is_root};

use super::{build, layout::Layout};
use crate::{image, process};

pub use gpu_operator_harness::real_node::{NODE_NAME, PAUSE_IMAGE, TAINT};

/// Whether this cluster has a real node (its directory exists).
pub fn is_configured(layout: &Layout) -> bool {
    layout.real_node_dir().join("containerd.toml").is_file()
}

/// Builds what the node needs (kubelet, pause, images), before the control plane starts.
pub fn prepare(layout: &Layout) -> anyhow::Result<()> {
    if !is_root() {
        bail!(
            "--real-node runs containerd and a kubelet, which need root (mounts, cgroups, network namespaces): run as root"
        );
    }
    ensure_packages()?;
    let node = Node::of(layout);
    let routes = process::output(Command::new("ip").args(["-4", "route", "show", &node.subnet]))?;
    if !routes.trim().is_empty() {
        bail!(
            "the real node's pod subnet {} is already routed here ({}): another cluster with a real node uses it; stop that one or pick a {} below 256 that differs",
            node.subnet,
            routes.trim(),
            super::layout::PORT_OFFSET_ENV
        );
    }
    build::ensure_kubelet(layout)?;
    let pause = host::ensure_pause(layout)?;
    eprintln!("==> real node: building the images");
    let out = layout.images();
    image::build_ours(&image::default_name(), &out)?;
    image::nvidia_stand_in(&out)?;
    image::pause(&pause, PAUSE_IMAGE, &out)?;
    Ok(())
}

/// Starts containerd and the kubelet and waits for the node to be Ready (control plane up).
pub async fn start(layout: &Layout, client: &kube::Client) -> anyhow::Result<()> {
    let node = Node::of(layout);
    write_configs(layout, &node)?;
    network(&node)?;
    shared_root_mount()?;
    for dir in cgroup_hierarchies() {
        fs::create_dir_all(dir.join(node.cgroup_root.trim_start_matches('/')))?;
    }

    eprintln!("==> starting containerd");
    let step = Instant::now();
    let mut containerd = Command::new("containerd");
    containerd
        .arg("--config")
        .arg(node.dir.join("containerd.toml"));
    let pid = process::spawn_daemon(
        &mut containerd,
        &layout.log("containerd"),
        &layout.pid_file("containerd"),
    )?;
    wait(layout, "containerd", pid, || {
        ctr(&node)
            .arg("version")
            .output()
            .is_ok_and(|o| o.status.success())
    })
    .await?;
    eprintln!(
        "    containerd ready in {}",
        process::minutes(step.elapsed())
    );
    import_images(layout, &node)?;

    eprintln!("==> starting kubelet ({NODE_NAME})");
    let step = Instant::now();
    let pid = process::spawn_daemon(
        &mut kubelet_command(layout, &node),
        &layout.log("kubelet"),
        &layout.pid_file("kubelet"),
    )?;
    let nodes: Api<KubeNode> = Api::all(client.clone());
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        if !process::alive(pid) {
            bail!(
                "kubelet exited during start-up; last lines of its log:\n{}",
                process::tail(&layout.log("kubelet"), 25)
            );
        }
        if let Ok(Some(found)) = nodes.get_opt(NODE_NAME).await
            && super::nodes::is_ready(&found)
        {
            break;
        }
        if Instant::now() > deadline {
            bail!(
                "node {NODE_NAME} was not Ready after 3 minutes; last lines of the kubelet's log:\n{}",
                process::tail(&layout.log("kubelet"), 25)
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let taint = serde_json::json!({"spec": {"taints": [{"key": TAINT.0, "value": TAINT.1, "effect": "NoSchedule"}]}});
    nodes
        .patch(NODE_NAME, &PatchParams::default(), &Patch::Merge(&taint))
        .await
        .context("tainting the real node")?;
    eprintln!(
        "    {NODE_NAME} Ready in {}",
        process::minutes(step.elapsed())
    );
    Ok(())
}

/// Stops the node and removes what it left on the machine (see [`teardown`]).
pub fn down(layout: &Layout) -> Vec<String> {
    teardown::down(layout, &Node::of(layout))
}

fn write_configs(layout: &Layout, node: &Node) -> anyhow::Result<()> {
    let net_d = node.dir.join("cni/net.d");
    fs::create_dir_all(&net_d)?;
    fs::create_dir_all(node.pod_logs())?;
    fs::create_dir_all(node.kubelet_root())?;
    fs::write(
        net_d.join("10-gpu-operator-e2e.conflist"),
        node.cni_conflist(),
    )?;
    fs::write(
        node.dir.join("kubelet.yaml"),
        node.kubelet_config(&layout.pki()),
    )?;
    // Last: its presence tells `down` there is a node to tear down.
    fs::write(
        node.dir.join("containerd.toml"),
        node.containerd_toml(PAUSE_IMAGE),
    )?;
    Ok(())
}

/// The pod bridge with its gateway address, and the `kubernetes` Service's DNAT.
fn network(node: &Node) -> anyhow::Result<()> {
    let ip = |args: &[&str]| process::run(Command::new("ip").args(args));
    ip(&["link", "add", &node.bridge, "type", "bridge"])?;
    let prefix = node.subnet.rsplit_once('/').map_or("24", |(_, p)| p);
    ip(&[
        "addr",
        "add",
        &format!("{}/{prefix}", node.gateway),
        "dev",
        &node.bridge,
    ])?;
    ip(&["link", "set", &node.bridge, "up"])?;
    fs::write(
        format!("/proc/sys/net/ipv4/conf/{}/route_localnet", node.bridge),
        "1",
    )
    .context("allowing the bridge to reach 127.0.0.1 (route_localnet)")?;
    let iptables =
        |args: &[&str]| process::run(Command::new("iptables").args(["-t", "nat"]).args(args));
    iptables(&["-N", &node.chain])?;
    iptables(&[
        "-A",
        &node.chain,
        "-d",
        "10.96.0.1/32",
        "-p",
        "tcp",
        "--dport",
        "443",
        "-j",
        "DNAT",
        "--to-destination",
        &format!("127.0.0.1:{}", node.apiserver_port),
    ])?;
    iptables(&["-I", "PREROUTING", "-i", &node.bridge, "-j", &node.chain])?;
    Ok(())
}

/// Makes `/` a shared mount, as systemd does on every Kubernetes host: the operands' hostPath
/// mounts with `mountPropagation: HostToContainer`/`Bidirectional` (the validations directory,
/// the host root) need it, or containerd refuses them ("is mounted on "/" but it is not a shared
/// or slave mount"). This machine has no systemd, so `/` starts private; a marker file lets
/// `down` put it back.
fn shared_root_mount() -> anyhow::Result<()> {
    let info = fs::read_to_string("/proc/self/mountinfo")?;
    let root_is_shared = info.lines().any(|line| {
        let fields: Vec<&str> = line.split(' ').collect();
        fields.get(4) == Some(&"/")
            && fields
                .iter()
                .skip(6)
                .take_while(|f| **f != "-")
                .any(|f| f.starts_with("shared:"))
    });
    if !root_is_shared {
        fs::write(teardown::ROOT_MADE_SHARED, "")?;
        process::run(Command::new("mount").args(["--make-rshared", "/"]))?;
    }
    Ok(())
}

fn cgroup_hierarchies() -> Vec<std::path::PathBuf> {
    fs::read_dir("/sys/fs/cgroup")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir() && !p.is_symlink())
        .collect()
}

fn ctr(node: &Node) -> Command {
    let mut command = Command::new("ctr");
    command
        .arg("--address")
        .arg(&node.socket)
        .args(["--namespace", "k8s.io"]);
    command
}

fn import_images(layout: &Layout, node: &Node) -> anyhow::Result<()> {
    let dir = layout.images();
    for entry in fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "tar") {
            eprintln!("    importing {}", path.display());
            process::run(ctr(node).args(["images", "import"]).arg(&path))?;
        }
    }
    Ok(())
}

fn kubelet_command(layout: &Layout, node: &Node) -> Command {
    let mut command = Command::new(layout.kubernetes_bin().join("kubelet"));
    command
        .arg(format!(
            "--config={}",
            node.dir.join("kubelet.yaml").display()
        ))
        .arg(format!(
            "--kubeconfig={}",
            node.dir.join("kubeconfig").display()
        ))
        .arg(format!("--root-dir={}", node.kubelet_root().display()))
        .arg(format!("--hostname-override={NODE_NAME}"))
        // The kubelet refuses a loopback node IP (no InternalIP, so no `kubectl logs/exec`):
        // the pod bridge's address is local, and the API server reaches the kubelet there.
        .arg(format!("--node-ip={}", node.gateway))
        .arg("--v=1");
    command
}

async fn wait(
    layout: &Layout,
    name: &str,
    pid: u32,
    ready: impl Fn() -> bool,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ready() {
        if !process::alive(pid) || Instant::now() > deadline {
            bail!(
                "{name} did not start; last lines of its log:\n{}",
                process::tail(&layout.log(name), 25)
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Ok(())
}
