//! The patch series of a bench run: `kubectl patch`es of the ClusterPolicy that alternate
//! `mig.strategy` single/mixed and `devicePlugin.config` between two ConfigMaps, each timed from
//! the request until a watch shows the device plugin DaemonSet's spec changed (its generation
//! moved). Any operator that renders NVIDIA's device plugin DaemonSet can be timed this way.

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use futures::StreamExt as _;
use gpu_operator_api::ClusterPolicy;
use gpu_operator_harness::operator::Operator;
use k8s_openapi::api::{apps::v1::DaemonSet, core::v1::ConfigMap};
use kube::{
    Api,
    api::{Patch, PatchParams, PostParams},
    runtime::{WatchStreamExt as _, watcher},
};
use serde_json::{Value, json};
use tokio::sync::watch;

use super::patch_parts::Timed;

/// Patches in a series (at least ten, so p95 means something).
pub const PATCHES: usize = 12;
/// Pause after each landed patch so its follow-up writes (conditions, status) fall in its turn.
const SETTLE: Duration = Duration::from_secs(3);
/// How long one patch may take to reach the DaemonSet.
const PATCH_TIMEOUT: Duration = Duration::from_secs(120);
/// The two device plugin configurations the series switches between.
const CONFIGS: [&str; 2] = ["bench-plugin-config-a", "bench-plugin-config-b"];

/// The `i`-th patch of the series and what it changes, for the log.
pub(crate) fn patch(i: usize) -> (Value, String) {
    if i.is_multiple_of(2) {
        let strategy = if i.is_multiple_of(4) {
            "mixed"
        } else {
            "single"
        };
        (
            json!({"spec": {"mig": {"strategy": strategy}}}),
            format!("mig.strategy={strategy}"),
        )
    } else {
        let name = CONFIGS[(i / 2) % 2];
        (
            json!({"spec": {"devicePlugin": {"config": {"name": name, "default": "default"}}}}),
            format!("devicePlugin.config.name={name}"),
        )
    }
}

/// Creates the two device plugin ConfigMaps the series names (a valid plugin configuration each).
pub async fn create_configs(client: &kube::Client, namespace: &str) -> anyhow::Result<()> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    for (i, name) in CONFIGS.iter().enumerate() {
        let config = format!(
            "version: v1\nflags:\n  migStrategy: none\n  plugin:\n    deviceListStrategy: envvar\n# bench {i}\n"
        );
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": name},
            "data": {"default": config},
        }))?;
        api.create(&PostParams::default(), &cm)
            .await
            .with_context(|| format!("creating ConfigMap {name}"))?;
    }
    Ok(())
}

/// Runs the series against ClusterPolicy `name`; returns each patch's send time and latency, in
/// order.
pub async fn series(
    client: &kube::Client,
    operator: &mut Operator,
    namespace: &str,
    daemonset: &str,
    name: &str,
) -> anyhow::Result<Vec<Timed>> {
    let policies: Api<ClusterPolicy> = Api::all(client.clone());
    let daemonsets: Api<DaemonSet> = Api::namespaced(client.clone(), namespace);
    let (tx, mut generations) = watch::channel(0_i64);
    let config = watcher::Config::default().fields(&format!("metadata.name={daemonset}"));
    let watch = tokio::spawn(async move {
        let mut events = std::pin::pin!(watcher(daemonsets, config).applied_objects());
        while let Some(event) = events.next().await {
            if let Ok(ds) = event {
                let generation = ds.metadata.generation.unwrap_or_default();
                tx.send_if_modified(|g| std::mem::replace(g, generation) != generation);
            }
        }
    });
    let result = async {
        // The watch's first event: the DaemonSet as it is.
        tokio::time::timeout(Duration::from_secs(30), generations.wait_for(|g| *g > 0))
            .await
            .context("no watch event of the device plugin DaemonSet within 30 s")??;
        let mut latencies = Vec::with_capacity(PATCHES);
        for i in 0..PATCHES {
            let before = *generations.borrow_and_update();
            let (body, what) = patch(i);
            let sent_at = k8s_openapi::jiff::Timestamp::now();
            let sent = Instant::now();
            policies
                .patch(name, &PatchParams::default(), &Patch::Merge(&body))
                .await
                .with_context(|| format!("patching the ClusterPolicy ({what})"))?;
            // The guard `wait_for` returns holds the watch value's lock: dropped at once, or the
            // watch task's next send blocks a runtime worker.
            let landed = tokio::time::timeout(PATCH_TIMEOUT, generations.wait_for(|g| *g > before))
                .await
                .map(|seen| seen.map(|_| ()));
            let latency = sent.elapsed().as_secs_f64();
            if !operator.is_running() {
                bail!(
                    "the operator exited during the patch series; its log ends:\n{}",
                    operator.log_tail()
                );
            }
            match landed {
                Ok(Ok(())) => {}
                Ok(Err(_)) => bail!("the DaemonSet watch ended"),
                Err(_) => bail!(
                    "patch {} ({what}) did not reach {daemonset} within {PATCH_TIMEOUT:?}",
                    i + 1
                ),
            }
            // The time it was sent, to find the patch in the operator's log.
            eprintln!(
                "    patch {:>2} ({what}) sent {sent_at}: {:.0} ms",
                i + 1,
                latency * 1e3
            );
            latencies.push(Timed {
                sent: sent_at,
                latency_s: latency,
            });
            tokio::time::sleep(SETTLE).await;
        }
        Ok(latencies)
    }
    .await;
    watch.abort();
    result
}

/// The `p`-th percentile (0–100) of `values` by nearest rank; `None` when there are none.
#[expect(clippy::cast_precision_loss, reason = "a handful of samples")]
pub fn percentile(values: &[f64], p: f64) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    if sorted.is_empty() {
        return None;
    }
    // Nearest rank: the smallest value with at least p% of the values at or below it, by
    // counting (no float-to-index casts).
    let len = sorted.len();
    let rank = (1..=len)
        .find(|&k| k as f64 * 100.0 >= p * len as f64)
        .unwrap_or(len);
    sorted.get(rank - 1).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let values: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(percentile(&values, 50.0), Some(10.0));
        assert_eq!(percentile(&values, 95.0), Some(19.0));
        assert_eq!(percentile(&values, 100.0), Some(20.0));
        assert_eq!(percentile(&[3.0, 1.0, 2.0], 50.0), Some(2.0));
        assert_eq!(percentile(&[], 50.0), None);
    }

    #[test]
    fn the_series_alternates_mig_strategies_and_plugin_configs() {
        let whats: Vec<String> = (0..6).map(|i| patch(i).1).collect();
        assert_eq!(
            whats,
            [
                "mig.strategy=mixed",
                "devicePlugin.config.name=bench-plugin-config-a",
                "mig.strategy=single",
                "devicePlugin.config.name=bench-plugin-config-b",
                "mig.strategy=mixed",
                "devicePlugin.config.name=bench-plugin-config-a",
            ]
        );
    }
}
