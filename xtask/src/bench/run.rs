//! One bench run on a cluster that is up: install the CRD, start the operator as a host process
//! under a ServiceAccount token of its own, create a ClusterPolicy and time it to `ready`, watch
//! the steady state, time a series of `kubectl patch`es to the updated DaemonSet, then count the
//! operator's writes in the API server's audit log and read its memory and CPU from `/proc`.
//! Optional steps follow the steady window: the sandbox relabel (`--sandbox`), the GPU health
//! reports (`--health`), and after the patches the driver upgrade (`--upgrade`).

use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};
use gpu_operator_api::{ClusterPolicy, State, conditions};
use gpu_operator_harness::{
    access::client_for,
    crd::repo_root,
    operator::{IMAGES, Operator, audit_log_beside, service_account_kubeconfig_from, writes_in},
};
use k8s_openapi::{
    api::{apps::v1::DaemonSet, core::v1::Namespace},
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    jiff::Timestamp,
};
use kube::{
    Api, ResourceExt as _,
    api::{Patch, PatchParams, PostParams},
};
use serde_json::json;

use serde::Deserialize as _;

use super::{
    patch_parts::{self, Timed},
    patches,
    proc_stats::{clock_ticks, cpu_seconds, load_average, status_mib},
    report::Run,
};
use crate::cluster::http_ok;

/// Namespace of the operator and its operands.
pub(crate) const NAMESPACE: &str = "gpu-operator";
/// The device plugin DaemonSet the patch step watches.
const PLUGIN: &str = "nvidia-device-plugin-daemonset";
/// The operand DaemonSets that must cover every GPU node (with `--sandbox`, every container
/// node).
pub(crate) const CONTAINER_DAEMONSETS: [&str; 2] = [PLUGIN, "nvidia-operator-validator"];
/// Quiet time after `ready` before the steady window: longer than every debounce, so the
/// status writes that follow `ready` count as rollout.
const SETTLE: Duration = Duration::from_secs(10);
/// How often progress is printed while waiting.
const PROGRESS_EVERY: Duration = Duration::from_secs(15);

/// How to run one size.
#[allow(
    clippy::struct_excessive_bools,
    reason = "one switch per optional step, each read by name"
)]
pub struct Options {
    /// The `gpu-operator` binary.
    pub binary: PathBuf,
    /// Length of the steady window.
    pub steady: Duration,
    /// How long to wait for `ready`.
    pub ready_timeout: Duration,
    /// Where the operator log and its kubeconfig go.
    pub dir: PathBuf,
    /// Extra environment for the operator.
    pub env: Vec<(String, String)>,
    /// Our operator's `--log-level` (not used with `args`).
    pub log_level: String,
    /// The operator's command-line arguments with placeholders (see [`Operator::spawn_args`]);
    /// `None`: ours (`run --leader-elect …`).
    pub args: Option<Vec<String>>,
    /// The ServiceAccount the operator runs as, so the audit log tells operators apart.
    pub account: String,
    /// CRD manifests applied (server-side) before the operator starts, besides ours.
    pub crds: Vec<PathBuf>,
    /// Run the GPU health step (see [`super::health`]) after the steady window.
    pub health: bool,
    /// End with the driver upgrade step (see [`super::upgrade`]).
    pub upgrade: bool,
    /// The drivers in three NVIDIADriver pools (see [`super::pools`]).
    pub pools: bool,
    /// A third of the GPU nodes VM nodes, and the relabel step (see [`super::sandbox`]).
    pub sandbox: bool,
    /// A GPUCluster with a third of the GPU nodes on DRA (see [`super::dra`]).
    pub dra: bool,
    /// The ClusterPolicy to create (see [`super::policy`]).
    pub policy: ClusterPolicy,
}

/// Points in time the audit log is split at.
#[derive(Default)]
struct Marks {
    created: Option<Timestamp>,
    steady_from: Option<Timestamp>,
    steady_to: Option<Timestamp>,
    patches_from: Option<Timestamp>,
    patches_to: Option<Timestamp>,
    patches: Vec<Timed>,
    policy: Option<String>,
    upgrade: Option<(Timestamp, Timestamp)>,
    /// The sandbox relabel step's window.
    relabel: Option<(Timestamp, Timestamp)>,
    /// The health step's window and the agents' audit-log user.
    health: Option<(super::health::Window, String)>,
}

/// Measures one run on the cluster of the admin `kubeconfig`; a failed step is recorded in
/// [`Run::error`] and the measurements taken so far are kept.
pub async fn measure(kubeconfig: &Path, run: &mut Run, options: &Options) {
    let mut marks = Marks::default();
    let mut user = None;
    run.load_average.push(load_average());
    let steps = Box::pin(steps(kubeconfig, run, options, &mut marks, &mut user));
    if let Err(error) = steps.await {
        eprintln!("    ! {error:#}");
        run.error = Some(format!("{error:#}"));
    }
    run.load_average.push(load_average());
    if let (Some(user), Some(created)) = (user, marks.created)
        && let Err(error) = count_writes(kubeconfig, &user, created, &marks, run)
    {
        run.error.get_or_insert_with(|| format!("{error:#}"));
    }
}

/// Prepares the cluster, runs the operator through the steps, and stops it.
async fn steps(
    kubeconfig: &Path,
    run: &mut Run,
    options: &Options,
    marks: &mut Marks,
    user: &mut Option<String>,
) -> anyhow::Result<()> {
    let client = client_for(kubeconfig).await?;
    install_crd(&client).await?;
    for path in &options.crds {
        apply_crds(&client, path).await?;
    }
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": NAMESPACE}}))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .context("creating the operator namespace")?;
    std::fs::create_dir_all(&options.dir)?;
    let (operator_kubeconfig, operator_user) = service_account_kubeconfig_from(
        kubeconfig,
        &client,
        NAMESPACE,
        &options.account,
        "cluster-admin",
        &options.dir,
    )
    .await?;
    patches::create_configs(&client, NAMESPACE).await?;
    *user = Some(operator_user);
    let env: Vec<(&str, &str)> = IMAGES
        .into_iter()
        .chain(options.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .collect();
    let ticks = clock_ticks();
    let log = options.dir.join("operator.log");
    let mut operator = match &options.args {
        None => Operator::spawn(
            &options.binary,
            &options.log_level,
            &operator_kubeconfig,
            NAMESPACE,
            &env,
            &log,
        )?,
        Some(args) => Operator::spawn_args(
            &options.binary,
            args,
            &operator_kubeconfig,
            NAMESPACE,
            &env,
            &log,
        )?,
    };
    let pid = operator.pid();
    let result = Box::pin(observe(
        kubeconfig,
        &client,
        &mut operator,
        run,
        options,
        marks,
        ticks,
    ))
    .await;
    run.peak_rss_mib = status_mib(pid, "VmHWM");
    run.cpu_total_s = cpu_seconds(pid, ticks);
    operator.stop()?;
    result
}

/// The measured part: caches synced, ClusterPolicy to ready, steady state, patch.
async fn observe(
    kubeconfig: &Path,
    client: &kube::Client,
    operator: &mut Operator,
    run: &mut Run,
    options: &Options,
    marks: &mut Marks,
    ticks: f64,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let (pid, probe_port) = (operator.pid(), operator.probe_port);
    wait_for(
        operator,
        "the operator's caches to sync",
        Duration::from_secs(600),
        async |_| Ok(http_ok(probe_port, "/readyz").then_some(())),
    )
    .await?;
    run.caches_synced_s = Some(started.elapsed().as_secs_f64());
    eprintln!(
        "    caches synced after {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let policies: Api<ClusterPolicy> = Api::all(client.clone());
    let daemonsets: Api<DaemonSet> = Api::namespaced(client.clone(), NAMESPACE);
    let (policy, mut stacks, mut pools) = policy_to_create(client, options, run).await?;
    let policy = &policy;
    let name = policy.name_any();
    marks.policy = Some(name.clone());
    let gpu_nodes = run.gpu_nodes;
    marks.created = Some(Timestamp::now());
    let created = Instant::now();
    policies.create(&PostParams::default(), policy).await?;
    wait_for(
        operator,
        "the ClusterPolicy to be ready",
        options.ready_timeout,
        async |elapsed| {
            let policy = policies.get(&name).await?;
            if elapsed {
                let rss =
                    status_mib(pid, "VmRSS").map_or_else(String::new, |m| format!("{m:.1} MiB"));
                let secs = created.elapsed().as_secs_f64();
                eprintln!("    … {secs:.0} s: {}; RSS {rss}", progress(&policy));
            }
            let pools_ready = !options.pools || super::pools::ready(client).await?;
            let covered = covered(client, &daemonsets, gpu_nodes, (&stacks, &mut pools)).await?;
            Ok((is_ready(&policy) && pools_ready && covered).then_some(()))
        },
    )
    .await?;
    run.ready_s = Some(created.elapsed().as_secs_f64());
    run.cpu_rollout_s = cpu_seconds(pid, ticks);
    eprintln!(
        "    ready after {:.1} s; settling {SETTLE:?}, then {:?} of steady state",
        created.elapsed().as_secs_f64(),
        options.steady
    );

    tokio::time::sleep(SETTLE).await;
    marks.steady_from = Some(Timestamp::now());
    let cpu_before = cpu_seconds(pid, ticks);
    tokio::time::sleep(options.steady).await;
    marks.steady_to = Some(Timestamp::now());
    run.steady_window_s = options.steady.as_secs();
    run.cpu_steady_s = cpu_seconds(pid, ticks).zip(cpu_before).map(|(a, b)| a - b);
    run.steady_rss_mib = status_mib(pid, "VmRSS");
    if !operator.is_running() {
        bail!(
            "the operator exited; its log ends:\n{}",
            operator.log_tail()
        );
    }
    if let (Some(stacks), Some(sandbox)) = (&mut stacks, run.sandbox.as_mut()) {
        let step = super::sandbox::relabel(client, operator, &daemonsets, stacks, sandbox).await;
        marks.relabel = Some(step?);
    }
    // The health step runs on the converged fleet, before the patch series starts rollouts
    // (at 5,000 nodes a device plugin rollout, one node at a time, takes over an hour).
    if options.health {
        let mut health = super::health::HealthRun::default();
        let step = super::health::run(
            kubeconfig,
            client,
            operator,
            &name,
            options.steady,
            &options.dir,
            &mut health,
        )
        .await;
        run.health = Some(health);
        marks.health = Some(step?);
    }
    marks.patches_from = Some(Timestamp::now());
    let series = patches::series(client, operator, NAMESPACE, PLUGIN, &name).await;
    marks.patches_to = Some(Timestamp::now());
    marks.patches = series?;
    run.patch_latencies_s = marks.patches.iter().map(|t| t.latency_s).collect();
    if options.upgrade {
        let mut upgrade = super::upgrade::UpgradeRun::default();
        let window = if options.pools {
            super::pools::upgrade(client, operator, ticks, &mut upgrade).await
        } else {
            super::upgrade::run(client, operator, &name, run.gpu_nodes, ticks, &mut upgrade).await
        };
        run.upgrade = Some(upgrade);
        marks.upgrade = Some(window?);
    }
    Ok(())
}

/// The ClusterPolicy of the run; with `--pools`, handing the drivers to the NVIDIADrivers it
/// creates first; with `--sandbox`, with sandbox workloads on, after labelling a third of the
/// GPU nodes VM nodes (their stacks returned); with `--dra`, after labelling a third of the GPU
/// nodes for DRA and creating the GPUCluster (the pools returned).
async fn policy_to_create(
    client: &kube::Client,
    options: &Options,
    run: &mut Run,
) -> anyhow::Result<(
    ClusterPolicy,
    Option<super::sandbox::Stacks>,
    Option<super::dra::Pools>,
)> {
    let pools = if options.dra {
        let dra = run.dra.get_or_insert_default();
        Some(super::dra::prepare(client, dra).await?)
    } else {
        None
    };
    let policy = if options.pools {
        super::pools::create(client).await?;
        super::pools::hand_over(&options.policy)
    } else {
        options.policy.clone()
    };
    if !options.sandbox {
        return Ok((policy, None, pools));
    }
    let mut sandbox = super::sandbox::SandboxRun::default();
    let stacks = super::sandbox::label_fleet(client, &mut sandbox).await;
    run.sandbox = Some(sandbox);
    Ok((super::sandbox::enable(&policy)?, Some(stacks?), pools))
}

/// Calls `check` about once a second until it returns `Some`, the operator exits or `timeout`
/// passes; `check` gets `true` when it should print progress.
async fn wait_for<T>(
    operator: &mut Operator,
    what: &str,
    timeout: Duration,
    mut check: impl AsyncFnMut(bool) -> anyhow::Result<Option<T>>,
) -> anyhow::Result<T> {
    let started = Instant::now();
    let mut next_progress = started + PROGRESS_EVERY;
    loop {
        let report = Instant::now() >= next_progress;
        if report {
            next_progress += PROGRESS_EVERY;
        }
        // A failed request (say, a slow API server) is retried, not fatal.
        match check(report).await {
            Ok(Some(value)) => return Ok(value),
            Err(error) if report => eprintln!("    … {what}: {error:#}"),
            Ok(None) | Err(_) => {}
        }
        if !operator.is_running() {
            bail!(
                "the operator exited while waiting for {what}; its log ends:\n{}",
                operator.log_tail()
            );
        }
        if started.elapsed() > timeout {
            bail!(
                "timed out after {timeout:?} waiting for {what}; the operator's log ends:\n{}",
                operator.log_tail()
            );
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Whether every operand DaemonSet has a ready pod on each of the `gpu_nodes` (the ClusterPolicy
/// may say `ready` while nodes are still being labelled: the bench waits for the whole fleet);
/// with `--sandbox`, each on the nodes of its stack; with `--dra`, each on its pool, and the
/// GPUCluster `ready`.
async fn covered(
    client: &kube::Client,
    daemonsets: &Api<DaemonSet>,
    gpu_nodes: u32,
    (stacks, pools): (
        &Option<super::sandbox::Stacks>,
        &mut Option<super::dra::Pools>,
    ),
) -> anyhow::Result<bool> {
    if let Some(pools) = pools {
        return super::dra::ready(client, daemonsets, pools).await;
    }
    if let Some(stacks) = stacks {
        return super::sandbox::covered(daemonsets, stacks).await;
    }
    let want = i32::try_from(gpu_nodes)?;
    for name in CONTAINER_DAEMONSETS {
        let Some(ds) = daemonsets.get_opt(name).await? else {
            return Ok(false);
        };
        let status = ds.status.unwrap_or_default();
        if status.desired_number_scheduled != want || status.number_ready != want {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Whether the ClusterPolicy says `ready`, with the `Ready` condition reconciled.
pub(crate) fn is_ready(policy: &ClusterPolicy) -> bool {
    let Some(status) = &policy.status else {
        return false;
    };
    status.state == State::Ready
        && status.conditions.iter().flatten().any(|c| {
            c.type_ == conditions::READY
                && c.status == "True"
                && c.reason == conditions::reason::RECONCILED
        })
}

/// The operand conditions' messages, shortened, for progress lines.
fn progress(policy: &ClusterPolicy) -> String {
    let operands = [
        conditions::operand::DEVICE_PLUGIN_READY,
        conditions::operand::VALIDATOR_READY,
    ];
    let parts: Vec<String> = policy
        .status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .filter(|c| operands.contains(&c.type_.as_str()))
        .map(|c| {
            let message: String = c.message.chars().take(90).collect();
            format!("{}: {message}", c.type_)
        })
        .collect();
    if parts.is_empty() {
        "no operand condition yet".to_owned()
    } else {
        parts.join(" | ")
    }
}

/// Installs the generated ClusterPolicy CRD and waits until ClusterPolicies are served.
pub(crate) async fn install_crd(client: &kube::Client) -> anyhow::Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    // Ours, as the chart installs them (the NVIDIADriver one is used by `--pools`, the GPUCluster
    // one by `--dra`).
    for file in [
        "crds/clusterpolicies.nvidia.com.yaml",
        "crds/nvidiadrivers.nvidia.com.yaml",
        "crds/gpuclusters.nvidia.com.yaml",
    ] {
        let path = repo_root().join(file);
        let crd: CustomResourceDefinition = serde_yaml::from_str(&std::fs::read_to_string(&path)?)
            .with_context(|| format!("reading {}", path.display()))?;
        crds.patch(
            &crd.name_any(),
            &PatchParams::apply("gpu-operator-bench").force(),
            &Patch::Apply(&crd),
        )
        .await
        .with_context(|| format!("installing the CRD of {file}"))?;
    }
    let policies: Api<ClusterPolicy> = Api::all(client.clone());
    let drivers: Api<gpu_operator_api::NvidiaDriver> = Api::all(client.clone());
    let deadline = Instant::now() + Duration::from_secs(60);
    let limit = kube::api::ListParams::default().limit(1);
    while policies.list(&limit).await.is_err() || drivers.list(&limit).await.is_err() {
        if Instant::now() > deadline {
            bail!(
                "ClusterPolicies and NVIDIADrivers were not served within a minute of installing their CRDs"
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Ok(())
}

/// Splits the operator's writes since `created` into the rollout and the steady window.
fn count_writes(
    kubeconfig: &Path,
    user: &str,
    created: Timestamp,
    marks: &Marks,
    run: &mut Run,
) -> anyhow::Result<()> {
    let log = audit_log_beside(kubeconfig)?;
    let writes = writes_in(&log, user, created)?;
    if let (Some(from), Some(policy)) = (marks.patches_from, &marks.policy) {
        let admin = writes_in(&log, patch_parts::ADMIN, from)?;
        run.patch_parts = patch_parts::split(&marks.patches, &admin, &writes, policy, PLUGIN);
    }
    if let Some((from, to)) = marks.relabel
        && let Some(sandbox) = run.sandbox.as_mut()
    {
        for (at, write) in writes_in(&log, patch_parts::ADMIN, from)? {
            if at <= to {
                sandbox
                    .cluster_writes
                    .add(&write.verb, &write.resource, write.code);
            }
        }
        let nodes: std::collections::BTreeSet<&str> = writes
            .iter()
            .filter(|(at, w)| *at > from && *at <= to && w.resource == "nodes")
            .map(|(_, w)| w.name.as_str())
            .collect();
        sandbox.nodes_written = u32::try_from(nodes.len())?;
    }
    if let Some(((from, counted, _), agents)) = &marks.health
        && let Some(health) = run.health.as_mut()
    {
        for (at, write) in writes_in(&log, agents, *from)? {
            let target = if at <= *counted {
                &mut health.agent_first
            } else {
                &mut health.agent_again
            };
            target.add(&write.verb, &write.resource, write.code);
        }
    }
    for (at, write) in writes {
        let resource = write.resource.as_str();
        let window = |from: Option<Timestamp>, to: Option<Timestamp>| {
            from.is_some_and(|from| at > from) && to.is_none_or(|to| at <= to)
        };
        let (target, leases) = if window(Some(created), marks.steady_from) {
            (&mut run.rollout_writes, &mut run.rollout_lease_writes)
        } else if window(marks.steady_from, marks.steady_to) {
            (&mut run.steady_writes, &mut run.steady_lease_writes)
        } else if window(marks.patches_from, marks.patches_to) {
            (&mut run.patch_writes, &mut run.patch_lease_writes)
        } else if let Some(((from, counted, to), _)) = &marks.health
            && let Some(health) = run.health.as_mut()
            && window(Some(*from), Some(*to))
        {
            if resource != "leases" {
                let target = if at <= *counted {
                    &mut health.operator_reports
                } else {
                    &mut health.operator_steady
                };
                target.add(&write.verb, resource, write.code);
                if resource == super::report::STATUS_WRITES {
                    target.add_status_writer(write.field_manager.as_deref());
                }
            }
            continue;
        } else if let Some((from, to)) = marks.relabel
            && let Some(sandbox) = run.sandbox.as_mut()
            && window(Some(from), Some(to))
        {
            if resource != "leases" {
                sandbox.writes.add(&write.verb, resource, write.code);
            }
            continue;
        } else if let Some((from, to)) = marks.upgrade
            && let Some(upgrade) = run.upgrade.as_mut()
            && window(Some(from), Some(to))
        {
            if resource != "leases" {
                upgrade.writes.add(&write.verb, resource, write.code);
                if resource == super::report::STATUS_WRITES {
                    upgrade
                        .writes
                        .add_status_writer(write.field_manager.as_deref());
                }
            }
            continue;
        } else {
            continue;
        };
        if resource == "leases" {
            *leases += 1;
        } else {
            target.add(&write.verb, resource, write.code);
            if resource == super::report::STATUS_WRITES {
                target.add_status_writer(write.field_manager.as_deref());
            }
        }
    }
    Ok(())
}

/// Applies (server-side) every CustomResourceDefinition in the YAML file or directory `path`.
async fn apply_crds(client: &kube::Client, path: &Path) -> anyhow::Result<()> {
    let files: Vec<PathBuf> = if path.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
            .collect();
        files.sort();
        files
    } else {
        vec![path.to_owned()]
    };
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for file in files {
        let text = std::fs::read_to_string(&file)?;
        for document in serde_yaml::Deserializer::from_str(&text) {
            let value = serde_yaml::Value::deserialize(document)
                .with_context(|| format!("reading {}", file.display()))?;
            if value.get("kind").and_then(|k| k.as_str()) != Some("CustomResourceDefinition") {
                continue;
            }
            let crd: CustomResourceDefinition = serde_yaml::from_value(value)
                .with_context(|| format!("reading a CRD in {}", file.display()))?;
            crds.patch(
                &crd.name_any(),
                &PatchParams::apply("gpu-operator-bench").force(),
                &Patch::Apply(&crd),
            )
            .await
            .with_context(|| format!("applying CRD {} from {}", crd.name_any(), file.display()))?;
        }
    }
    Ok(())
}
