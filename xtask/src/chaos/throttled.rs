//! Scenario "a refusing API server" (`cargo xtask chaos --only throttled`; two 1,000-node
//! rollouts, too long for the full profile): API Priority and Fairness, as a cluster admin would
//! set it, limits the operator's ServiceAccount to a priority level of the smallest share (one
//! nominal share: the API server gives it about 3 of its 600 seats), one queue of two, and no
//! borrowing, so what does not fit is refused with 429. The same 1,000-node rollout runs once
//! without the limit (the control) and once with it; each must end `ready` on every GPU node.
//! From the audit log (every request of that ServiceAccount is recorded): the requests refused
//! with 429 (the throttled run must have some, or the limit did not bite), every request sent
//! (refused ones included: retries are bounded when the throttled run sends at most
//! [`MAX_REQUEST_RATIO`] times the control's), and the writes once converged (none: no hot loop).
//! The API server answering the FlowSchema with its `Dangling` condition shows APF is on.

use std::{fmt::Write as _, path::Path, time::Duration};

use anyhow::{Context as _, bail};
use gpu_operator_harness::{
    access::client_for,
    fleet::Fleet,
    operator::{audit_log_beside, requests_of},
};
use k8s_openapi::{
    api::flowcontrol::v1::{FlowSchema, PriorityLevelConfiguration},
    jiff::Timestamp,
};
use kube::{Api, api::PostParams};
use serde_json::json;

use crate::{
    bench::{self, report::Run, run as bench_run},
    cluster::{self, Layout, UpArgs},
};

/// The fleet of the rollouts.
const NODES: u32 = 1000;
/// The ServiceAccount the operator runs as; the harness's audit policy records all its requests.
const ACCOUNT: &str = "gpu-operator-throttled";
/// Name of the FlowSchema and of its priority level.
const FLOW: &str = "chaos-throttled-operator";
/// Bound of the throttled run's requests (refused ones included) over the control's.
const MAX_REQUEST_RATIO: f64 = 2.0;
/// The steady window after `ready`, in which nothing may be written.
const STEADY: Duration = Duration::from_secs(30);

/// One rollout and its figures.
#[derive(Clone, Debug, Default)]
pub struct Rollout {
    /// Whether APF limited the operator.
    pub throttled: bool,
    /// The bench's measurements (ready time, writes, patch latencies).
    pub run: Run,
    /// Requests the operator sent from the ClusterPolicy's creation on, refused ones included.
    pub requests: usize,
    /// Of which refused with 429.
    pub refused: usize,
    /// The most requests the server completed for it in one second.
    pub peak_per_second: usize,
}

impl Rollout {
    fn converged(&self) -> bool {
        self.run.error.is_none() && self.run.ready_s.is_some()
    }

    fn steady_writes(&self) -> u64 {
        self.run.steady_writes.total()
    }
}

/// Whether the pair passed: both converged, the limit bit, retries bounded, no write once
/// converged.
pub fn passed(rollouts: &[Rollout]) -> bool {
    let [control, throttled] = rollouts else {
        return false;
    };
    control.converged()
        && throttled.converged()
        && throttled.refused > 0
        && ratio(throttled, control) <= MAX_REQUEST_RATIO
        && throttled.steady_writes() == 0
        && control.steady_writes() == 0
}

#[expect(
    clippy::cast_precision_loss,
    reason = "request counts are far below 2^52"
)]
fn ratio(throttled: &Rollout, control: &Rollout) -> f64 {
    throttled.requests as f64 / control.requests.max(1) as f64
}

/// Runs the control, then the throttled rollout, each on a fresh 1,000-node cluster.
pub fn run(layout: &Layout, binary: &Path, out: &Path) -> anyhow::Result<Vec<Rollout>> {
    let fleet = Fleet::default().scaled_to(NODES)?;
    let mut rollouts = Vec::with_capacity(2);
    for throttled in [false, true] {
        eprintln!(
            "==> chaos: {NODES}-node rollout, {}",
            if throttled {
                "operator limited by API Priority and Fairness"
            } else {
                "no limit (the control)"
            }
        );
        let mut rollout = Rollout {
            throttled,
            run: Run {
                nodes: NODES,
                gpu_nodes: bench::gpu_nodes(&fleet),
                ..Run::default()
            },
            ..Rollout::default()
        };
        let up = UpArgs {
            nodes: Some(i64::from(NODES)),
            ..UpArgs::default()
        };
        cluster::run(cluster::Action::Up(up))?;
        let dir = out.join(if throttled { "throttled" } else { "control" });
        let result = tokio::runtime::Runtime::new()?.block_on(Box::pin(one(
            layout,
            binary,
            &dir,
            &mut rollout,
        )));
        cluster::down(layout)?;
        if let Err(error) = result {
            rollout
                .run
                .error
                .get_or_insert_with(|| format!("{error:#}"));
        }
        eprintln!(
            "    ready after {}, {} requests, {} refused (429)",
            rollout
                .run
                .ready_s
                .map_or_else(|| "never".to_owned(), |s| format!("{s:.1} s")),
            rollout.requests,
            rollout.refused
        );
        rollouts.push(rollout);
    }
    Ok(rollouts)
}

async fn one(
    layout: &Layout,
    binary: &Path,
    dir: &Path,
    rollout: &mut Rollout,
) -> anyhow::Result<()> {
    let kubeconfig = layout.kubeconfig();
    let client = client_for(&kubeconfig).await?;
    if rollout.throttled {
        limit(&client).await?;
    }
    let since = Timestamp::now();
    let options = bench_run::Options {
        binary: binary.to_owned(),
        steady: STEADY,
        ready_timeout: bench::ready_timeout(NODES),
        dir: dir.to_owned(),
        env: Vec::new(),
        log_level: "info".to_owned(),
        args: None,
        account: ACCOUNT.to_owned(),
        crds: Vec::new(),
        upgrade: false,
        health: false,
        pools: false,
        sandbox: false,
        dra: false,
        policy: bench::policy::load(
            &gpu_operator_harness::crd::repo_root().join(bench::policy::DEFAULT),
            None,
        )?
        .object,
    };
    bench_run::measure(&kubeconfig, &mut rollout.run, &options).await;
    // The audit log's batch (1 s) reaches the file.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let user = format!("system:serviceaccount:{}:{ACCOUNT}", bench_run::NAMESPACE);
    let requests = requests_of(&audit_log_beside(&kubeconfig)?, &user, since)?;
    rollout.requests = requests.len();
    rollout.refused = requests.iter().filter(|(_, r)| r.code == 429).count();
    rollout.peak_per_second = peak_per_second(requests.iter().map(|(at, _)| at.as_second()));
    if rollout.requests == 0 {
        bail!("the audit log shows no request by {user}: the counts would be meaningless");
    }
    Ok(())
}

/// The priority level and FlowSchema that limit [`ACCOUNT`]; waits until the API server's APF
/// controller has seen the FlowSchema (its `Dangling` condition), which it does only with APF on.
async fn limit(client: &kube::Client) -> anyhow::Result<()> {
    let level: PriorityLevelConfiguration = serde_json::from_value(json!({
        "metadata": {"name": FLOW},
        "spec": {"type": "Limited", "limited": {
            "nominalConcurrencyShares": 1,
            "lendablePercent": 0,
            "borrowingLimitPercent": 0,
            "limitResponse": {"type": "Queue", "queuing": {
                "queues": 1, "handSize": 1, "queueLengthLimit": 2
            }}
        }}
    }))?;
    Api::<PriorityLevelConfiguration>::all(client.clone())
        .create(&PostParams::default(), &level)
        .await
        .context("creating the PriorityLevelConfiguration")?;
    let schema: FlowSchema = serde_json::from_value(json!({
        "metadata": {"name": FLOW},
        "spec": {
            "priorityLevelConfiguration": {"name": FLOW},
            // Before the built-in `service-accounts` schema (9000).
            "matchingPrecedence": 100,
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [{
                "subjects": [{"kind": "ServiceAccount", "serviceAccount": {
                    "name": ACCOUNT, "namespace": bench_run::NAMESPACE
                }}],
                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                    "clusterScope": true, "namespaces": ["*"]}],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]
            }]
        }
    }))?;
    let schemas = Api::<FlowSchema>::all(client.clone());
    schemas
        .create(&PostParams::default(), &schema)
        .await
        .context("creating the FlowSchema")?;
    for _ in 0..60 {
        let seen = schemas.get(FLOW).await?.status.is_some_and(|status| {
            status.conditions.iter().flatten().any(|c| {
                c.type_.as_deref() == Some("Dangling") && c.status.as_deref() == Some("False")
            })
        });
        if seen {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    bail!(
        "the API server did not mark FlowSchema {FLOW} as not dangling within 60 s: is API Priority and Fairness off (--enable-priority-and-fairness)?"
    )
}

/// The most items in one second, given each item's second.
fn peak_per_second(seconds: impl Iterator<Item = i64>) -> usize {
    let mut counts = std::collections::HashMap::<i64, usize>::new();
    for second in seconds {
        *counts.entry(second).or_default() += 1;
    }
    counts.into_values().max().unwrap_or(0)
}

/// The pair as a Markdown section.
pub fn markdown(rollouts: &[Rollout], out: &mut String) {
    out.push_str(
        "\n## A refusing API server: API Priority and Fairness limits the operator (1,000 nodes)\n\n\
         | run | ready after | requests sent | refused (429) | peak requests/s | writes to ready | patch p50 | writes once converged |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    for r in rollouts {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            if r.throttled {
                "limited (1 share, 1 queue of 2)"
            } else {
                "no limit (control)"
            },
            r.run
                .ready_s
                .map_or_else(|| "**no**".to_owned(), |s| format!("{s:.1} s")),
            r.requests,
            r.refused,
            r.peak_per_second,
            r.run.rollout_writes.total(),
            r.run
                .patch_p50_s()
                .map_or_else(|| "-".to_owned(), |s| format!("{s:.1} s")),
            r.steady_writes(),
        );
    }
    if let [control, throttled] = rollouts {
        let _ = writeln!(
            out,
            "\n**{}**: the throttled run sent {:.2}× the control's requests (bound {MAX_REQUEST_RATIO}×), \
             {} of them refused; both must end ready and write nothing in {} s once converged.",
            if passed(rollouts) { "passed" } else { "FAILED" },
            ratio(throttled, control),
            throttled.refused,
            STEADY.as_secs(),
        );
    }
    for r in rollouts {
        if let Some(error) = &r.run.error {
            let _ = writeln!(
                out,
                "\n{} run failed: {error}",
                if r.throttled { "throttled" } else { "control" }
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peak_is_the_busiest_second() {
        assert_eq!(peak_per_second([3, 1, 3, 2, 3, 1].into_iter()), 3);
        assert_eq!(peak_per_second(std::iter::empty()), 0);
    }
}
