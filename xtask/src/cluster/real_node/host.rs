//! What the real node needs from the machine: Debian's containerd, runc, CNI plugins and static
//! busybox (installed with apt-get when missing and running as root, otherwise named with the
//! command that installs them), and the pause binary built from the kubernetes module's `pause.c`.

use std::{path::Path, process::Command};

use anyhow::{Context as _, bail};

use super::super::layout::{KUBERNETES, Layout};
use super::config::CNI_BIN_DIR;
use crate::process;

/// A file each Debian package installs, and the package.
const PACKAGES: [(&str, &str); 6] = [
    ("/usr/bin/containerd", "containerd"),
    ("/usr/bin/ctr", "containerd"),
    ("/usr/sbin/runc", "runc"),
    ("/usr/lib/cni/bridge", "containernetworking-plugins"),
    ("/bin/busybox", "busybox-static"),
    ("/usr/bin/gcc", "gcc"),
];

/// The packages whose files are missing.
fn missing_packages() -> Vec<&'static str> {
    let mut missing: Vec<&str> = PACKAGES
        .iter()
        .filter(|(file, _)| !Path::new(file).exists())
        .map(|(_, package)| *package)
        .collect();
    missing.dedup();
    missing
}

/// Installs the missing runtime pieces (as root), or fails naming the command that does.
pub fn ensure_packages() -> anyhow::Result<()> {
    let missing = missing_packages();
    if missing.is_empty() {
        return Ok(());
    }
    let install = format!(
        "apt-get update && apt-get install --yes --no-install-recommends {}",
        missing.join(" ")
    );
    if !is_root() {
        bail!(
            "the real node needs {} (Debian packages); install them as root with `{install}` and run again",
            missing.join(", ")
        );
    }
    eprintln!("==> real node: installing {}", missing.join(", "));
    process::run(Command::new("apt-get").arg("update").arg("-q"))?;
    process::run(
        Command::new("apt-get")
            .args(["install", "--yes", "-q", "--no-install-recommends"])
            .args(&missing)
            .env("DEBIAN_FRONTEND", "noninteractive"),
    )
    .with_context(|| format!("installing the real node's packages failed; try `{install}`"))?;
    let still = missing_packages();
    if !still.is_empty() {
        bail!("{} still missing after apt-get install", still.join(", "));
    }
    if !Path::new(CNI_BIN_DIR).join("host-local").exists() {
        bail!("{CNI_BIN_DIR}/host-local is missing: reinstall containernetworking-plugins");
    }
    Ok(())
}

/// Whether the real node can run at all: it needs root (containerd, mounts, network).
pub fn is_root() -> bool {
    process::output(Command::new("id").arg("-u")).is_ok_and(|uid| uid.trim() == "0")
}

/// Builds the pause binary from the kubernetes module's `build/pause/linux/pause.c` with
/// `gcc -static`, once, into the cache; returns its path.
pub fn ensure_pause(layout: &Layout) -> anyhow::Result<std::path::PathBuf> {
    let target = layout.pause_bin().join("pause");
    if target.is_file() {
        return Ok(target);
    }
    let modcache = process::output(Command::new("go").args(["env", "GOMODCACHE"]))
        .context("finding the Go module cache (Go builds the control plane)")?;
    let source = Path::new(modcache.trim()).join(format!(
        "k8s.io/kubernetes@{KUBERNETES}/build/pause/linux/pause.c"
    ));
    if !source.is_file() {
        process::output(Command::new("go").env("GOTOOLCHAIN", "local").args([
            "mod",
            "download",
            &format!("k8s.io/kubernetes@{KUBERNETES}"),
        ]))?;
    }
    eprintln!("  -> pause (gcc -static {})", source.display());
    std::fs::create_dir_all(layout.pause_bin())?;
    let tmp = target.with_extension("tmp");
    process::run(
        Command::new("gcc")
            .args(["-Os", "-static", "-Wall", "-o"])
            .arg(&tmp)
            .arg(&source),
    )?;
    std::fs::rename(&tmp, &target)?;
    Ok(target)
}
