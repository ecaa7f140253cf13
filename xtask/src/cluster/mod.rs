//! `cargo xtask cluster up|down|status`: a real Kubernetes control plane on 127.0.0.1 with a fleet of
//! simulated GPU nodes, built from the Go modules and cached outside the repository.

mod build;
mod components;
mod layout;
mod nhc;
mod nodes;
mod pki;
pub mod real_node;
mod status;
mod up;

use std::time::Duration;

use clap::Subcommand;

#[cfg(test)]
pub use build::PROMTOOL_BUILD_COMMAND;
pub use build::{ensure as ensure_built, ensure_promtool};
pub use components::http_ok;
pub use layout::{Layout, MDBOOK, display as display_path};
pub use nhc::ensure_nhc;
pub use nodes::is_ready as node_is_ready;
pub use up::{UpArgs, restart};

use crate::process;
pub use components::Component;

/// What to do with the local cluster.
#[derive(Subcommand)]
pub enum Action {
    /// Build (first time only), start the control plane and create the simulated fleet.
    Up(UpArgs),
    /// Stop every component and delete the cluster's state. Safe to run when nothing is up.
    Down,
    /// Show which components run, on which ports, and how many nodes the cluster has.
    Status,
}

/// Runs one cluster action.
pub fn run(action: Action) -> anyhow::Result<()> {
    let layout = Layout::from_env()?;
    match action {
        Action::Up(args) => {
            up::up(&layout, &args)?;
            if !args.build_only {
                print_env(&layout);
            }
            Ok(())
        }
        Action::Down => down(&layout),
        Action::Status => status::print(&layout),
    }
}

/// Whether any component of a cluster is running.
pub fn is_up(layout: &Layout) -> bool {
    Component::ALL
        .iter()
        .any(|c| running_pid(layout, *c).is_some())
        || real_node::is_configured(layout)
}

/// Cleans up what a stopped cluster left behind (after a reboot, say: a real node's network and
/// cgroups, with no API server running), so that [`is_up`] is false and a fresh one can start.
pub fn clean_if_stale(layout: &Layout) -> anyhow::Result<()> {
    if is_up(layout) && running_pid(layout, Component::Apiserver).is_none() {
        eprintln!("==> a stopped local cluster left state behind; cleaning it up");
        down(layout)?;
    }
    Ok(())
}

/// The pid of a running component, from its pid file.
fn running_pid(layout: &Layout, component: Component) -> Option<u32> {
    let pid = std::fs::read_to_string(layout.pid_file(component.name())).ok()?;
    let pid = pid.trim().parse().ok()?;
    process::alive(pid).then_some(pid)
}

/// Stops every component (reverse start order) and removes the run directory. Idempotent.
pub fn down(layout: &Layout) -> anyhow::Result<()> {
    let mut stopped = Vec::new();
    if real_node::is_configured(layout) {
        // First, while the API server still answers nothing and before the run directory goes.
        let removed = real_node::down(layout);
        if !removed.is_empty() {
            eprintln!("real node: removed {}", removed.join(", "));
        }
        let left = real_node::teardown::mounts_below(&layout.run_dir());
        if !left.is_empty() {
            anyhow::bail!(
                "could not unmount {} under {}; unmount them (`umount -l`) and run `cargo xtask cluster down` again",
                left.len(),
                layout.run_dir().display()
            );
        }
    }
    for component in Component::ALL.iter().rev() {
        if let Some(pid) = running_pid(layout, *component) {
            process::stop_group(pid, Duration::from_secs(10))?;
            stopped.push(component.name());
        }
    }
    let run_dir = layout.run_dir();
    if run_dir.exists() {
        std::fs::remove_dir_all(&run_dir)?;
    }
    if stopped.is_empty() {
        eprintln!("no local cluster was running");
    } else {
        eprintln!("stopped {}", stopped.join(", "));
    }
    Ok(())
}

/// The environment a shell needs to use the cluster, as `export` lines.
pub fn env_lines(layout: &Layout) -> String {
    let path: Vec<String> = layout
        .path_dirs()
        .iter()
        .map(|d| d.display().to_string())
        .collect();
    format!(
        "export KUBECONFIG={}\nexport PATH={}:$PATH",
        layout.kubeconfig().display(),
        path.join(":")
    )
}

fn print_env(layout: &Layout) {
    println!("# use the cluster from your shell:\n{}", env_lines(layout));
}
