//! `cargo xtask chaos`: what production does to the operator, done on purpose on a fresh local
//! cluster, with a figure for each scenario: the operator SIGKILLed at random moments of rollouts
//! and ClusterPolicy changes ([`kills`]), the leader of two candidates killed mid-rollout
//! ([`failover`]), and kube-apiserver and etcd restarted while idle and mid-rollout
//! ([`restarts`]), and (`--only throttled`, two 1,000-node rollouts) API Priority and Fairness
//! limiting the operator ([`throttled`]). The short profile (5 kills, 1 failover) runs inside `cargo xtask ci`; `--full`
//! kills 50 times, fails over 5 times and restarts the control plane 4 times. Prints
//! the tables and writes them to `target/chaos/latest.md`; fails when any figure is off.

mod failover;
mod kills;
mod report;
mod restarts;
mod snapshot;
mod steps;
mod throttled;

use std::{path::PathBuf, process::Command, time::Instant};

use anyhow::{Context as _, bail};
use clap::Args as ClapArgs;
use gpu_operator_harness::{
    access::client_for,
    fleet::Fleet,
    operator::{service_account_kubeconfig_from, workspace_binary},
};
use k8s_openapi::api::core::v1::Namespace;
use kube::{Api, api::PostParams};

use crate::{
    bench::{self, patches, run::install_crd},
    cluster::{self, Layout, UpArgs},
    process,
};

/// Kills in the short profile (the one `cargo xtask ci` runs).
const SHORT_KILLS: usize = 5;
/// Kills in the full profile.
const FULL_KILLS: usize = 50;
/// Leader failovers in the short and the full profile.
const FAILOVERS: [usize; 2] = [1, 5];

/// Options of `cargo xtask chaos`.
#[derive(ClapArgs, Debug, Default)]
pub struct Args {
    /// The full profile: 50 kills instead of 5, 5 failovers instead of 1, and kube-apiserver and
    /// etcd restarted (idle and mid-rollout).
    #[arg(long)]
    pub full: bool,
    /// Seed of the kill moments (default: from the clock; the report names it, so a run can be
    /// repeated).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Runs this one scenario only (kills and failovers with the full profile's counts), to
    /// measure or debug it.
    #[arg(long, value_enum)]
    pub only: Option<Scenario>,
}

/// The scenarios, for `--only`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Scenario {
    /// The operator SIGKILLed mid-rollout and mid-change.
    Kills,
    /// The leader of two candidates SIGKILLed mid-rollout.
    Failover,
    /// kube-apiserver and etcd restarted.
    Restarts,
    /// A 1,000-node rollout with API Priority and Fairness limiting the operator, and one
    /// without (only with `--only`: two 1,000-node clusters are too long for the full profile).
    Throttled,
}

impl Args {
    /// Whether `scenario` runs: every scenario of the profile (restarts only in the full one), or
    /// the one `--only` names.
    fn runs(&self, scenario: Scenario) -> bool {
        match self.only {
            Some(only) => only == scenario,
            None => match scenario {
                Scenario::Kills | Scenario::Failover => true,
                Scenario::Restarts => self.full,
                Scenario::Throttled => false,
            },
        }
    }

    fn profile(&self) -> &'static str {
        match (self.only, self.full) {
            (Some(Scenario::Kills), _) => "kills only",
            (Some(Scenario::Failover), _) => "failover only",
            (Some(Scenario::Restarts), _) => "restarts only",
            (Some(Scenario::Throttled), _) => "throttled only",
            (None, true) => "full",
            (None, false) => "short",
        }
    }
}

/// Runs the chaos scenarios on a fresh cluster (see the module docs).
pub fn run(args: &Args) -> anyhow::Result<()> {
    let layout = Layout::from_env()?;
    if cluster::is_up(&layout) {
        bail!(
            "a local cluster is already up; chaos restarts components of a fresh one: stop it first with `cargo xtask cluster down`"
        );
    }
    process::run(Command::new(env!("CARGO")).args([
        "build",
        "--package",
        "gpu-operator",
        "--bin",
        "gpu-operator",
    ]))?;
    let binary = workspace_binary("gpu-operator");
    let (kills, failovers) = if args.full || args.only.is_some() {
        (FULL_KILLS, FAILOVERS[1])
    } else {
        (SHORT_KILLS, FAILOVERS[0])
    };
    let seed = args.seed.unwrap_or_else(clock_seed);
    let out = bench::target_dir().join("chaos");
    std::fs::create_dir_all(&out)?;
    let started = Instant::now();
    if args.runs(Scenario::Throttled) {
        let throttled = throttled::run(&layout, &binary, &out)?;
        return finish(
            &report::Report {
                profile: args.profile(),
                seed,
                revision: bench::revision(),
                fleet: Fleet::default().scaled_to(1000)?.to_string(),
                minutes: started.elapsed().as_secs_f64() / 60.0,
                cycles: Vec::new(),
                failovers: Vec::new(),
                restarts: Vec::new(),
                throttled,
            },
            &out,
        );
    }
    cluster::run(cluster::Action::Up(UpArgs::default()))?;
    let runtime = tokio::runtime::Runtime::new()?;
    let result = runtime.block_on(async {
        let target = prepare(&layout, binary, &out).await?;
        let mut rng = Rng::new(seed);
        let cycles = if args.runs(Scenario::Kills) {
            Box::pin(kills::run(&target, kills, &mut rng)).await?
        } else {
            Vec::new()
        };
        let failovers = if args.runs(Scenario::Failover) {
            eprintln!("==> chaos: leader failover");
            failover::run(&target, failovers, &mut rng).await
        } else {
            Vec::new()
        };
        let restarts = if args.runs(Scenario::Restarts) {
            eprintln!("==> chaos: kube-apiserver and etcd restarted");
            Box::pin(restarts::run(&layout, &target)).await?
        } else {
            Vec::new()
        };
        anyhow::Ok((cycles, failovers, restarts))
    });
    cluster::down(&layout)?;
    let (cycles, failovers, restarts) = result?;
    let report = report::Report {
        profile: args.profile(),
        seed,
        revision: bench::revision(),
        fleet: Fleet::default().to_string(),
        minutes: started.elapsed().as_secs_f64() / 60.0,
        cycles,
        failovers,
        restarts,
        throttled: Vec::new(),
    };
    finish(&report, &out)
}

/// Prints the report, writes it to `out/latest.md`, and fails when any figure is off.
fn finish(report: &report::Report, out: &std::path::Path) -> anyhow::Result<()> {
    let markdown = report.markdown();
    std::fs::write(out.join("latest.md"), &markdown)?;
    println!("\n{markdown}");
    eprintln!("report: {}", out.join("latest.md").display());
    if !report.passed() {
        bail!(
            "some chaos rounds failed; see {}",
            out.join("latest.md").display()
        );
    }
    Ok(())
}

/// The operator's namespace, ServiceAccount (its own user in the audit log), the CRD and the
/// device plugin ConfigMaps the changes switch between.
async fn prepare(
    layout: &Layout,
    binary: PathBuf,
    out: &std::path::Path,
) -> anyhow::Result<kills::Target> {
    let admin = layout.kubeconfig();
    let client = client_for(&admin).await?;
    install_crd(&client).await?;
    let namespace: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": kills::NAMESPACE}}))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .context("creating the operator namespace")?;
    let mut candidates = Vec::with_capacity(2);
    for (account, pod_name) in [
        ("gpu-operator", "chaos-primary"),
        ("gpu-operator-standby", "chaos-standby"),
    ] {
        let dir = out.join(account);
        std::fs::create_dir_all(&dir)?;
        let (kubeconfig, user) = service_account_kubeconfig_from(
            &admin,
            &client,
            kills::NAMESPACE,
            account,
            "cluster-admin",
            &dir,
        )
        .await?;
        let log = dir.join("operator.log");
        // A fresh log per run.
        let _ = std::fs::remove_file(&log);
        candidates.push(kills::Candidate {
            kubeconfig,
            user,
            pod_name,
            log,
        });
    }
    patches::create_configs(&client, kills::NAMESPACE).await?;
    let (Some(standby), Some(primary)) = (candidates.pop(), candidates.pop()) else {
        bail!("two operator identities were not prepared");
    };
    Ok(kills::Target {
        client,
        admin_kubeconfig: admin,
        binary,
        primary,
        standby,
    })
}

fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_secs() ^ u64::from(d.subsec_nanos()))
}

/// A small xorshift generator: the kill moments need spread and a seed to repeat them, not
/// cryptographic quality.
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (0 is replaced: xorshift would stay at 0).
    pub fn new(seed: u64) -> Self {
        Self(if seed == 0 {
            0x9E37_79B9_7F4A_7C15
        } else {
            seed
        })
    }

    /// The next number, uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        // The top 53 bits make an exact f64 in [0, 1).
        #[expect(clippy::cast_precision_loss, reason = "53 bits fit an f64 exactly")]
        let fraction = (self.0 >> 11) as f64 / (1_u64 << 53) as f64;
        fraction
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kill_moments_spread_over_the_window_and_repeat_by_seed() {
        let mut rng = Rng::new(42);
        let draws: Vec<f64> = (0..1000).map(|_| rng.unit()).collect();
        assert!(draws.iter().all(|d| (0.0..1.0).contains(d)));
        assert!(draws.iter().any(|&d| d < 0.1) && draws.iter().any(|&d| d > 0.9));
        let mut again = Rng::new(42);
        assert_eq!(again.unit().to_bits(), draws[0].to_bits());
        assert!(Rng::new(0).unit() > 0.0);
    }
}
