//! `cluster up`: preflight checks, build, PKI, start each component and wait for it, create the fleet.
//! A failed or interrupted `up` stops whatever it had started.

use std::{
    fs,
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};
use clap::Args;
use gpu_operator_harness::fleet::Fleet;

use super::{
    Layout, build,
    components::{self, Component, Readiness},
    layout::ports,
    nodes, pki, real_node,
};
use crate::process;

/// Options of `cluster up`.
#[derive(Args, Debug, Clone, Default)]
pub struct UpArgs {
    /// Total number of simulated nodes, spread over the fleet's profiles in its proportions.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub nodes: Option<i64>,
    /// Which nodes to create, as PROFILE=COUNT pairs (profiles: h100, a100, t4, cpu).
    /// Default: h100=2,a100=2,t4=2,cpu=1.
    #[arg(long, value_name = "SPEC")]
    pub fleet: Option<String>,
    /// Only build the binaries into the cache (with `--real-node`, the kubelet too); start nothing.
    #[arg(long)]
    pub build_only: bool,
    /// Also start one real node: a kubelet with containerd (needs root; installs Debian's
    /// containerd, runc and CNI plugins when missing), with our image imported.
    #[arg(long)]
    pub real_node: bool,
}

impl UpArgs {
    /// The fleet these options ask for; fails with a hint on bad input.
    pub fn fleet(&self) -> anyhow::Result<Fleet> {
        let fleet = match &self.fleet {
            Some(spec) => spec.parse()?,
            None => Fleet::default(),
        };
        match self.nodes {
            None => Ok(fleet),
            Some(n) if n <= 0 => bail!("--nodes must be a positive number of nodes, got {n}"),
            Some(n) => fleet.scaled_to(u32::try_from(n).context("--nodes is too large")?),
        }
    }
}

/// Brings the cluster up (see the module docs).
pub fn up(layout: &Layout, args: &UpArgs) -> anyhow::Result<()> {
    let fleet = args.fleet()?;
    if args.build_only {
        build::ensure(layout)?;
        if args.real_node {
            build::ensure_kubelet(layout)?;
        }
        return Ok(());
    }
    if super::is_up(layout) {
        bail!(
            "a local cluster is already up (`cargo xtask cluster status` shows it): use it with `export KUBECONFIG={}`, or stop it first with `cargo xtask cluster down`",
            layout.kubeconfig().display()
        );
    }
    for component in Component::ALL {
        for port in component.ports(layout) {
            if !components::port_is_free(port) {
                bail!(
                    "port {port} on 127.0.0.1 (for {}) is already in use by another program: stop it (`ss -ltnp 'sport = :{port}'` shows which) and run again",
                    component.name()
                );
            }
        }
    }
    build::ensure(layout)?;
    if args.real_node {
        for port in [
            layout.port(ports::KUBELET),
            layout.port(ports::KUBELET_HEALTHZ),
        ] {
            if !components::port_is_free(port) {
                bail!(
                    "port {port} on 127.0.0.1 (for the real node's kubelet) is already in use: stop it (`ss -ltnp 'sport = :{port}'` shows which) or set {} to another offset",
                    super::layout::PORT_OFFSET_ENV
                );
            }
        }
        real_node::prepare(layout)?;
    }

    let started = Instant::now();
    let runtime = tokio::runtime::Runtime::new()?;
    let result = runtime.block_on(async {
        tokio::select! {
            result = start(layout, &fleet, args.real_node) => result,
            _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted")),
        }
    });
    if let Err(error) = result {
        eprintln!(
            "==> cluster up failed; stopping what it started (logs were in {})",
            layout.run_dir().join("logs").display()
        );
        let logs = keep_logs(layout);
        super::down(layout)?;
        return Err(error.context(format!("component logs kept in {logs}")));
    }
    eprintln!(
        "==> cluster up in {} with {} nodes ({fleet})",
        process::minutes(started.elapsed()),
        fleet.total()
    );
    Ok(())
}

async fn start(layout: &Layout, fleet: &Fleet, real_node: bool) -> anyhow::Result<()> {
    let run_dir = layout.run_dir();
    if run_dir.exists() {
        fs::remove_dir_all(&run_dir)?; // stale state of a cluster that is no longer running
    }
    fs::create_dir_all(run_dir.join("logs"))?;
    pki::write(layout)?;
    fs::write(run_dir.join("audit-policy.yaml"), components::AUDIT_POLICY)?;

    for component in Component::ALL {
        let step = Instant::now();
        eprintln!("==> starting {}", component.name());
        let pid = process::spawn_daemon(
            &mut component.command(layout),
            &layout.log(component.name()),
            &layout.pid_file(component.name()),
        )?;
        wait_ready(layout, component, pid).await?;
        eprintln!(
            "    {} ready in {}",
            component.name(),
            process::minutes(step.elapsed())
        );
    }
    let client = gpu_operator_harness::access::client_for(&layout.kubeconfig()).await?;
    nodes::create_fleet(&client, fleet).await?;
    fs::write(layout.fleet_record(), fleet.to_string())?;
    if real_node {
        real_node::start(layout, &client).await?;
    }
    Ok(())
}

/// Stops `component` (SIGTERM to its process group, SIGKILL after 10 s) and starts it again with
/// the same flags and data, as a restart in production would; returns once it is ready again.
pub async fn restart(layout: &Layout, component: Component) -> anyhow::Result<()> {
    if let Some(pid) = super::running_pid(layout, component) {
        process::stop_group(pid, Duration::from_secs(10))?;
    }
    let pid = process::spawn_daemon(
        &mut component.command(layout),
        &layout.log(component.name()),
        &layout.pid_file(component.name()),
    )?;
    wait_ready(layout, component, pid).await
}

/// Waits until `component` is ready; fails early, with its log, if the process exits.
async fn wait_ready(layout: &Layout, component: Component, pid: u32) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(180);
    let client = match component {
        Component::Etcd => None,
        _ => Some(gpu_operator_harness::access::client_for(&layout.kubeconfig()).await?),
    };
    loop {
        if !process::alive(pid) {
            bail!(
                "{} exited during start-up; last lines of {}:\n{}",
                component.name(),
                layout.log(component.name()).display(),
                process::tail(&layout.log(component.name()), 25)
            );
        }
        let ready = match (component.readiness(layout), &client) {
            (Readiness::Http(port, path), _) => components::http_ok(port, path),
            (Readiness::Listening(port), _) => components::port_is_listening(port),
            (Readiness::ApiserverReadyz, Some(client)) => readyz(client).await,
            (Readiness::DefaultServiceAccount, Some(client)) => {
                default_service_account(client).await
            }
            (_, None) => false,
        };
        if ready {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "{} was not ready after 3 minutes; last lines of {}:\n{}",
                component.name(),
                layout.log(component.name()).display(),
                process::tail(&layout.log(component.name()), 25)
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn readyz(client: &kube::Client) -> bool {
    let Ok(request) = http::Request::get("/readyz").body(Vec::new()) else {
        return false;
    };
    client
        .request_text(request)
        .await
        .is_ok_and(|body| body.trim() == "ok")
}

async fn default_service_account(client: &kube::Client) -> bool {
    let api: kube::Api<k8s_openapi::api::core::v1::ServiceAccount> =
        kube::Api::namespaced(client.clone(), "default");
    matches!(api.get_opt("default").await, Ok(Some(_)))
}

/// Copies the logs of a failed start out of the run directory (which `down` deletes).
fn keep_logs(layout: &Layout) -> String {
    let target = layout.run_dir().with_file_name("failed-up-logs");
    let _ = fs::remove_dir_all(&target);
    let _ = fs::create_dir_all(&target);
    if let Ok(entries) = fs::read_dir(layout.run_dir().join("logs")) {
        for entry in entries.flatten() {
            let _ = fs::copy(entry.path(), target.join(entry.file_name()));
        }
    }
    target.display().to_string()
}
