//! `cargo xtask demo`: the operator's main job on the local cluster. It brings the cluster up with
//! its simulated GPU fleet, installs the chart with `helm install`, runs the operator, shows the
//! ClusterPolicy and the operand pods becoming Ready, and prints what to try next.
//!
//! kwok runs no containers: the chart's operator pod becomes Ready but does nothing. The operator
//! that works runs here as a host process with a token of the chart's ServiceAccount, so it has
//! exactly the chart's RBAC (the e2e tests do the same). The chart's hooks (CRD apply, cleanups)
//! are Jobs that kwok marks `Succeeded` without running them, so the demo installs with
//! `--no-hooks` rather than wait for hooks that do nothing.

use std::{
    fmt::Write as _,
    path::PathBuf,
    process::Command,
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};
use clap::Args as ClapArgs;
use gpu_operator_api::ClusterPolicy;
use k8s_openapi::api::{apps::v1::DaemonSet, core::v1::Node};
use kube::{Api, ResourceExt as _, api::ListParams};

use crate::{
    chart,
    cluster::{self, Layout, UpArgs},
    codegen::workspace_root,
    process,
};

/// Namespace and release name of the demo install (NVIDIA's documented ones).
const NAMESPACE: &str = "gpu-operator";
/// The operator process's name in the run directory (pid file, log).
const OPERATOR: &str = "demo-operator";
/// How long the demo waits for the ClusterPolicy to become ready.
const READY_TIMEOUT: Duration = Duration::from_secs(180);

/// Options of `cargo xtask demo`.
#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Stop the demo's operator and the cluster, and delete the cluster's state.
    #[arg(long)]
    pub down: bool,
    /// Cluster options (`--nodes`, `--fleet`).
    #[command(flatten)]
    pub up: UpArgs,
}

/// Runs the demo (see the module docs).
pub fn run(args: &Args) -> anyhow::Result<()> {
    let layout = Layout::from_env()?;
    if args.down {
        stop_operator(&layout)?;
        return cluster::down(&layout);
    }
    cluster::clean_if_stale(&layout)?;
    if cluster::is_up(&layout) {
        eprintln!("==> the local cluster is already up; using it");
    } else {
        cluster::run(cluster::Action::Up(args.up.clone()))?;
    }
    eprintln!("==> building the operator");
    process::run(Command::new(env!("CARGO")).args([
        "build",
        "--package",
        "gpu-operator",
        "--bins",
    ]))?;
    install_chart(&layout)?;
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let client = gpu_operator_harness::access::client_for(&layout.kubeconfig()).await?;
        start_operator(&layout, &client).await?;
        show_nodes(&client).await?;
        watch_rollout(&client).await
    })?;
    print_next(&layout)
}

/// `helm upgrade --install` of the chart with default values (a second run keeps the release).
fn install_chart(layout: &Layout) -> anyhow::Result<()> {
    eprintln!(
        "==> helm install {NAMESPACE} {} -n {NAMESPACE} --create-namespace --no-hooks --wait",
        chart::CHART_DIR
    );
    let chart_dir = workspace_root().join(chart::CHART_DIR);
    let mut helm = Command::new(chart::helm()?);
    helm.args(["upgrade", "--install", NAMESPACE])
        .arg(&chart_dir)
        .args([
            "--namespace",
            NAMESPACE,
            "--create-namespace",
            "--no-hooks",
            "--wait",
            "--timeout",
            "2m",
        ])
        .env("KUBECONFIG", layout.kubeconfig());
    process::run(&mut helm)
}

fn operator_pid(layout: &Layout) -> Option<u32> {
    let pid = std::fs::read_to_string(layout.pid_file(OPERATOR)).ok()?;
    let pid = pid.trim().parse().ok()?;
    process::alive(pid).then_some(pid)
}

/// Starts `gpu-operator run` as a daemon under a token of the chart's ServiceAccount.
async fn start_operator(layout: &Layout, client: &kube::Client) -> anyhow::Result<()> {
    if let Some(pid) = operator_pid(layout) {
        eprintln!("==> the operator already runs (pid {pid})");
        return Ok(());
    }
    let dir = layout.run_dir();
    let (kubeconfig, user) = gpu_operator_harness::chart::token_kubeconfig_from(
        &layout.kubeconfig(),
        client,
        NAMESPACE,
        NAMESPACE,
        &dir,
    )
    .await
    .context("requesting a token of the chart's ServiceAccount")?;
    let binary = workspace_root().join("target/debug/gpu-operator");
    let (metrics, probes) = (layout.port(8080), layout.port(8081));
    let mut command = Command::new(&binary);
    command
        .args(["run", "--leader-elect"])
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg(format!("--metrics-bind-address=127.0.0.1:{metrics}"))
        .arg(format!("--health-probe-bind-address=127.0.0.1:{probes}"))
        .env("OPERATOR_NAMESPACE", NAMESPACE)
        .env_remove("KUBECONFIG");
    let log = layout.log(OPERATOR);
    let pid = process::spawn_daemon(&mut command, &log, &layout.pid_file(OPERATOR))?;
    eprintln!(
        "==> the operator runs on this host as {user} (pid {pid}); log: {}, metrics: http://127.0.0.1:{metrics}/metrics",
        log.display()
    );
    Ok(())
}

fn stop_operator(layout: &Layout) -> anyhow::Result<()> {
    if let Some(pid) = operator_pid(layout) {
        process::stop_group(pid, Duration::from_secs(20))?;
        eprintln!("stopped the demo operator (pid {pid})");
    }
    Ok(())
}

async fn show_nodes(client: &kube::Client) -> anyhow::Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let list = nodes.list(&ListParams::default()).await?;
    println!(
        "\n{:<16} {:<8} {:>4}  {:<24} {:<22} {:<6}",
        "NODE", "PROFILE", "GPUS", "PRODUCT", "RUNTIME", "READY"
    );
    for node in &list.items {
        let label = |key: &str| {
            node.labels()
                .get(key)
                .cloned()
                .unwrap_or_else(|| "-".to_owned())
        };
        let status = node.status.clone().unwrap_or_default();
        let gpus = status
            .capacity
            .as_ref()
            .and_then(|c| c.get("nvidia.com/gpu"))
            .map_or_else(|| "0".to_owned(), |q| q.0.clone());
        let runtime = status
            .node_info
            .map(|i| i.container_runtime_version)
            .unwrap_or_default();
        println!(
            "{:<16} {:<8} {:>4}  {:<24} {:<22} {:<6}",
            node.name_any(),
            label(gpu_operator_harness::fleet::PROFILE_LABEL),
            gpus,
            label("nvidia.com/gpu.product"),
            runtime,
            cluster::node_is_ready(node),
        );
    }
    Ok(())
}

/// Prints the ClusterPolicy state and each operand DaemonSet's ready pods whenever they change,
/// until the ClusterPolicy is ready.
async fn watch_rollout(client: &kube::Client) -> anyhow::Result<()> {
    let policies: Api<ClusterPolicy> = Api::all(client.clone());
    let daemonsets: Api<DaemonSet> = Api::namespaced(client.clone(), NAMESPACE);
    println!("\n==> rollout (ClusterPolicy cluster-policy, operand pods Ready/desired)");
    let started = Instant::now();
    let mut last = String::new();
    loop {
        let policy = policies.get_opt("cluster-policy").await?;
        let state = policy
            .as_ref()
            .and_then(|p| p.status.as_ref())
            .and_then(|s| serde_json::to_value(s.state).ok())
            .and_then(|state| state.as_str().map(str::to_owned))
            .unwrap_or_else(|| "pending".to_owned());
        let mut line = format!("cluster-policy: {state:<9}");
        for ds in daemonsets.list(&ListParams::default()).await? {
            let status = ds.status.clone().unwrap_or_default();
            let _ = write!(
                line,
                "  {} {}/{}",
                ds.name_any(),
                status.number_ready,
                status.desired_number_scheduled
            );
        }
        if line != last {
            println!("[{:>5.1}s] {line}", started.elapsed().as_secs_f32());
            last = line;
        }
        if let Some(policy) = policy.filter(|p| {
            p.status
                .as_ref()
                .is_some_and(|s| s.state == gpu_operator_api::State::Ready)
        }) {
            print_conditions(&policy);
            return Ok(());
        }
        if started.elapsed() > READY_TIMEOUT {
            bail!(
                "the ClusterPolicy is not ready after {READY_TIMEOUT:?}; see `kubectl describe clusterpolicy cluster-policy`"
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn print_conditions(policy: &ClusterPolicy) {
    println!(
        "\n{:<24} {:<6} {:<18} MESSAGE",
        "CONDITION", "STATUS", "REASON"
    );
    for c in policy
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
    {
        println!(
            "{:<24} {:<6} {:<18} {}",
            c.type_, c.status, c.reason, c.message
        );
    }
}

/// Values that turn on time-slicing (4 replicas per GPU) through NVIDIA's `devicePlugin.config`
/// keys, for the "next" commands.
const TIME_SLICING_VALUES: &str = "devicePlugin:
  config:
    create: true
    name: time-slicing-config
    default: any
    data:
      any: |-
        version: v1
        sharing:
          timeSlicing:
            resources:
              - name: nvidia.com/gpu
                replicas: 4
";

fn print_next(layout: &Layout) -> anyhow::Result<()> {
    let log: PathBuf = layout.log(OPERATOR);
    let values = layout.run_dir().join("time-slicing-values.yaml");
    std::fs::write(&values, TIME_SLICING_VALUES)?;
    println!(
        r#"
next:
  {env}

  # what runs
  kubectl get clusterpolicy                      # STATUS ready
  kubectl get daemonsets,pods -n {NAMESPACE} -o wide
  kubectl get nodes -L nvidia.com/gpu.present,nvidia.com/gpu.deploy.device-plugin,nvidia.com/mig.config

  # switch the MIG strategy: the device plugin rolls, the others stay
  kubectl patch clusterpolicy cluster-policy --type merge -p '{{"spec":{{"mig":{{"strategy":"mixed"}}}}}}'
  kubectl get ds nvidia-device-plugin-daemonset -n {NAMESPACE} -o jsonpath='{{.spec.template.spec.containers[0].env}}'

  # time-slicing through the chart's devicePlugin.config (NVIDIA's values keys)
  cat {values}
  helm upgrade {NAMESPACE} {chart} -n {NAMESPACE} --reuse-values --no-hooks -f {values}
  kubectl get configmap time-slicing-config -n {NAMESPACE} -o yaml
  kubectl describe clusterpolicy cluster-policy  # conditions per operand, events
  kubectl get events -n default --field-selector involvedObject.kind=ClusterPolicy

  # a typo is refused with the key named
  helm upgrade {NAMESPACE} {chart} -n {NAMESPACE} --reuse-values --set mig.strategy=auto

  tail -f {log}    # the operator's log
  cargo xtask demo --down    # stop everything"#,
        env = cluster::env_lines(layout).replace('\n', "\n  "),
        chart = chart::CHART_DIR,
        log = cluster::display_path(&log),
        values = cluster::display_path(&values),
    );
    Ok(())
}
