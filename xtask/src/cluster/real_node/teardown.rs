//! Stops the real node and removes every trace of it from the machine: its pods' processes, the
//! containerd shims, containerd and the kubelet, the mounts under the node's directory, the pods'
//! network namespaces, the bridge, the iptables chain and the cgroups. Idempotent, and safe on a
//! half-started node (each step tolerates what is not there).

use std::{
    fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use super::config::Node;
use crate::{cluster::Layout, process};

/// Hierarchies of cgroup v1 (this machine's layout) the kubelet creates pod cgroups in.
const CGROUP_FS: &str = "/sys/fs/cgroup";

/// Present while the real node made `/` shared (it was private before); `down` reverts it.
pub const ROOT_MADE_SHARED: &str = "/run/gpu-operator-e2e-root-made-shared";

/// Tears the node down (see the module docs); returns what it had to remove.
pub fn down(layout: &Layout, node: &Node) -> Vec<String> {
    let mut removed = Vec::new();
    if stop(layout, "kubelet") {
        removed.push("kubelet".to_owned());
    }
    let killed = kill_cgroup_processes(node);
    if killed > 0 {
        removed.push(format!("{killed} container processes"));
    }
    delete_tasks(node);
    if stop(layout, "containerd") {
        removed.push("containerd".to_owned());
    }
    let shims = kill_shims(node);
    if shims > 0 {
        removed.push(format!("{shims} containerd shims"));
    }
    let namespaces = delete_network_namespaces(node);
    if namespaces > 0 {
        removed.push(format!("{namespaces} network namespaces"));
    }
    if quiet(Command::new("ip").args(["link", "delete", &node.bridge])) {
        removed.push(format!("bridge {}", node.bridge));
    }
    if remove_chain(node) {
        removed.push(format!("iptables chain {}", node.chain));
    }
    let mounts = unmount_below(&node.dir);
    if mounts > 0 {
        removed.push(format!("{mounts} mounts"));
    }
    let cgroups = remove_cgroups(node);
    if cgroups > 0 {
        removed.push(format!("{cgroups} cgroups"));
    }
    remove_container_log_links(node);
    if Path::new(ROOT_MADE_SHARED).exists()
        && quiet(Command::new("mount").args(["--make-rprivate", "/"]))
    {
        let _ = fs::remove_file(ROOT_MADE_SHARED);
        removed.push("shared propagation of /".to_owned());
    }
    removed
}

/// Stops a component by its pid file; true when it was running.
fn stop(layout: &Layout, name: &str) -> bool {
    let Some(pid) = fs::read_to_string(layout.pid_file(name))
        .ok()
        .and_then(|p| p.trim().parse::<u32>().ok())
        .filter(|pid| process::alive(*pid))
    else {
        return false;
    };
    let _ = process::stop_group(pid, Duration::from_secs(10));
    true
}

/// Runs a command silently; true when it succeeded.
fn quiet(command: &mut Command) -> bool {
    command
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The cgroup directories of the node in every hierarchy, deepest first.
fn cgroup_dirs(node: &Node) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    let Ok(hierarchies) = fs::read_dir(CGROUP_FS) else {
        return dirs;
    };
    for hierarchy in hierarchies.flatten() {
        let root = hierarchy
            .path()
            .join(node.cgroup_root.trim_start_matches('/'));
        if root.is_dir() && !hierarchy.path().is_symlink() {
            collect_dirs(&root, &mut dirs);
        }
    }
    dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
    dirs
}

fn collect_dirs(dir: &Path, out: &mut Vec<PathBuf>) {
    out.push(dir.to_owned());
    if let Ok(entries) = fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                collect_dirs(&entry.path(), out);
            }
        }
    }
}

/// SIGKILLs every process in the node's cgroups (the pods' containers); how many there were.
fn kill_cgroup_processes(node: &Node) -> usize {
    let mut killed = 0;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut pids: Vec<String> = cgroup_dirs(node)
            .iter()
            .filter_map(|d| fs::read_to_string(d.join("cgroup.procs")).ok())
            .flat_map(|text| text.lines().map(str::to_owned).collect::<Vec<_>>())
            .collect();
        pids.sort();
        pids.dedup();
        if pids.is_empty() || Instant::now() > deadline {
            return killed;
        }
        killed = killed.max(pids.len());
        for pid in &pids {
            quiet(Command::new("kill").args(["-KILL", pid]));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Deletes containerd's tasks (their shims then exit and unmount the rootfs), while it runs.
fn delete_tasks(node: &Node) {
    let ctr = |args: &[&str]| {
        let mut command = Command::new("ctr");
        command
            .arg("--address")
            .arg(&node.socket)
            .args(["--namespace", "k8s.io", "--timeout", "10s"])
            .args(args);
        command
    };
    if !node.socket.exists() {
        return;
    }
    let Ok(list) = process::output(&mut ctr(&["tasks", "list", "--quiet"])) else {
        return;
    };
    for id in list.lines().map(str::trim).filter(|id| !id.is_empty()) {
        quiet(&mut ctr(&["tasks", "kill", "--signal", "SIGKILL", id]));
        quiet(&mut ctr(&["tasks", "delete", "--force", id]));
    }
}

/// Stops shims started by this node's containerd (their command line names its socket).
fn kill_shims(node: &Node) -> usize {
    let socket = node.socket.display().to_string();
    let mut pids = Vec::new();
    if let Ok(entries) = fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Ok(cmdline) = fs::read(entry.path().join("cmdline")) else {
                continue;
            };
            let words: Vec<String> = cmdline
                .split(|&b| b == 0)
                .map(|w| String::from_utf8_lossy(w).into_owned())
                .collect();
            let is_shim = words.first().is_some_and(|w| w.contains("containerd-shim"));
            if is_shim && words.contains(&socket) {
                pids.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
    }
    for pid in &pids {
        quiet(Command::new("kill").args(["-KILL", pid]));
    }
    pids.len()
}

/// Deletes the network namespaces whose interface has an address in the node's pod subnet.
fn delete_network_namespaces(node: &Node) -> usize {
    let prefix = node
        .subnet
        .rsplit_once('.')
        .map_or(String::new(), |(net, _)| format!("{net}."));
    let Ok(list) = process::output(Command::new("ip").args(["netns", "list"])) else {
        return 0;
    };
    let mut deleted = 0;
    for name in list.lines().filter_map(|l| l.split_whitespace().next()) {
        let addresses =
            process::output(Command::new("ip").args(["-n", name, "-4", "-o", "addr", "show"]))
                .unwrap_or_default();
        let ours = addresses
            .split_whitespace()
            .any(|word| word.starts_with(&prefix) && word.contains('/'));
        if ours && quiet(Command::new("ip").args(["netns", "delete", name])) {
            deleted += 1;
        }
    }
    deleted
}

/// Removes the chain that sends the `kubernetes` Service to the API server, and its jump.
fn remove_chain(node: &Node) -> bool {
    let jump = ["-i", node.bridge.as_str(), "-j", node.chain.as_str()];
    while quiet(
        Command::new("iptables")
            .args(["-t", "nat", "-D", "PREROUTING"])
            .args(jump),
    ) {}
    quiet(Command::new("iptables").args(["-t", "nat", "-F", &node.chain]))
        && quiet(Command::new("iptables").args(["-t", "nat", "-X", &node.chain]))
}

/// Mount points at or below `dir`, deepest first, from /proc/self/mountinfo.
pub fn mounts_below(dir: &Path) -> Vec<PathBuf> {
    let Ok(info) = fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    let mut mounts: Vec<PathBuf> = info
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|point| PathBuf::from(point.replace("\\040", " ")))
        .filter(|point| point.starts_with(dir))
        .collect();
    mounts.sort_by_key(|m| std::cmp::Reverse(m.components().count()));
    mounts.dedup();
    mounts
}

/// Unmounts everything below `dir` (lazily when busy); how many mounts there were.
fn unmount_below(dir: &Path) -> usize {
    let mut count = 0;
    for _ in 0..5 {
        let mounts = mounts_below(dir);
        if mounts.is_empty() {
            break;
        }
        count += mounts.len();
        for mount in mounts {
            if !quiet(Command::new("umount").arg(&mount)) {
                quiet(Command::new("umount").arg("--lazy").arg(&mount));
            }
        }
    }
    count
}

/// Removes the node's cgroups (empty once its processes are gone); how many.
fn remove_cgroups(node: &Node) -> usize {
    cgroup_dirs(node)
        .iter()
        .filter(|dir| fs::remove_dir(dir).is_ok())
        .count()
}

/// The kubelet links container logs into /var/log/containers; remove the links to this node's.
fn remove_container_log_links(node: &Node) {
    let logs = node.pod_logs();
    let Ok(entries) = fs::read_dir("/var/log/containers") else {
        return;
    };
    for entry in entries.flatten() {
        if fs::read_link(entry.path()).is_ok_and(|target| target.starts_with(&logs)) {
            let _ = fs::remove_file(entry.path());
        }
    }
}
