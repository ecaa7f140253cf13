//! `--pools`: the drivers in three NVIDIADriver pools, as a fleet with more than one kind of GPU
//! node runs them — `h100` and `a100` selecting their nodes by `nvidia.com/gpu.product`, and
//! `default` (`default: true`) serving the rest (the T4 nodes) — under a ClusterPolicy with
//! `driver.useNvidiaDriverCRD: true`. A run is ready once every pool is `ready` too. With
//! `--upgrade`, the upgrade step bumps the `a100` pool alone, under an `upgradePolicy` of its own
//! (`maxParallelUpgrades: 0`, `maxUnavailable: 25%`), and counts the writes per node of that pool.

use std::time::{Duration, Instant};

use gpu_operator_api::{ClusterPolicy, NvidiaDriver, nvidia_driver::NvidiaDriverState};
use gpu_operator_harness::operator::Operator;
use k8s_openapi::{
    api::{apps::v1::DaemonSet, core::v1::Node},
    jiff::Timestamp,
};
use kube::{
    Api, ResourceExt as _,
    api::{ListParams, Patch, PatchParams, PostParams},
};
use serde_json::json;

use super::{
    proc_stats::{cpu_seconds, status_mib},
    run::NAMESPACE,
    upgrade::{UpgradeRun, wait},
};

/// The pools: name and the `nvidia.com/gpu.product` it selects (`None`: the default).
const POOLS: [(&str, Option<&str>); 3] = [
    ("h100", Some("NVIDIA-H100-80GB-HBM3")),
    ("a100", Some("NVIDIA-A100-SXM4-80GB")),
    ("default", None),
];
/// The pool the upgrade step bumps.
const UPGRADED: (&str, &str) = ("a100", "NVIDIA-A100-SXM4-80GB");
/// The driver every pool starts on, and the one the upgrade moves its pool to.
const IMAGE: &str = "nvcr.io/nvidia/driver:580.82.07";
const NEW_IMAGE: &str = "nvcr.io/nvidia/driver:580.95.05";

/// `policy`, handing the drivers to NVIDIADrivers.
pub fn hand_over(policy: &ClusterPolicy) -> ClusterPolicy {
    let mut policy = policy.clone();
    policy.spec.driver.use_nvidia_driver_crd = Some(true);
    policy
}

/// Creates the three NVIDIADrivers.
pub async fn create(client: &kube::Client) -> anyhow::Result<()> {
    let drivers: Api<NvidiaDriver> = Api::all(client.clone());
    for (name, product) in POOLS {
        let spec = match product {
            Some(product) => json!({
                "image": IMAGE,
                "nodeSelector": {"nvidia.com/gpu.product": product},
            }),
            None => json!({"image": IMAGE, "default": true}),
        };
        let driver: NvidiaDriver = serde_json::from_value(json!({
            "apiVersion": "nvidia.com/v1alpha1", "kind": "NVIDIADriver",
            "metadata": {"name": name}, "spec": spec,
        }))?;
        drivers.create(&PostParams::default(), &driver).await?;
    }
    Ok(())
}

/// Whether every pool says `ready`.
pub async fn ready(client: &kube::Client) -> anyhow::Result<bool> {
    let drivers = Api::<NvidiaDriver>::all(client.clone())
        .list(&ListParams::default())
        .await?;
    Ok(drivers.items.len() == POOLS.len()
        && drivers.items.iter().all(|d| {
            d.status
                .as_ref()
                .is_some_and(|s| s.state == NvidiaDriverState::Ready)
        }))
}

/// The upgrade step on the `a100` pool; returns the window of the bump for the writes.
pub async fn upgrade(
    client: &kube::Client,
    operator: &mut Operator,
    ticks: f64,
    out: &mut UpgradeRun,
) -> anyhow::Result<(Timestamp, Timestamp)> {
    let (pool, product) = UPGRADED;
    let drivers: Api<NvidiaDriver> = Api::all(client.clone());
    let nodes: Api<Node> = Api::all(client.clone());
    let of_pool = ListParams::default().labels(&format!("nvidia.com/gpu.product={product}"));
    let size = nodes.list_metadata(&of_pool).await?.items.len();
    out.nodes = u32::try_from(size).ok();
    let enable = json!({"spec": {"upgradePolicy": {
        "autoUpgrade": true, "maxParallelUpgrades": 0, "maxUnavailable": "25%"
    }}});
    drivers
        .patch(pool, &PatchParams::default(), &Patch::Merge(&enable))
        .await?;
    let done = ListParams::default().labels(&format!(
        "nvidia.com/gpu.product={product},nvidia.com/gpu-driver-upgrade-state=upgrade-done"
    ));
    wait(
        operator,
        "the pool's nodes labelled upgrade-done",
        Duration::from_secs(900),
        async || Ok(nodes.list_metadata(&done).await?.items.len() >= size),
    )
    .await?;
    let pid = operator.pid();
    let cpu_before = cpu_seconds(pid, ticks);
    let from = Timestamp::now();
    let started = Instant::now();
    let bump = json!({"spec": {"image": NEW_IMAGE}});
    let generation = drivers
        .patch(pool, &PatchParams::default(), &Patch::Merge(&bump))
        .await?
        .metadata
        .generation;
    let daemonsets: Api<DaemonSet> = Api::namespaced(client.clone(), NAMESPACE);
    let mut max_rss: Option<f64> = None;
    wait(
        operator,
        "the pool's driver upgrade to finish",
        Duration::from_secs(3600),
        async || {
            if let Some(rss) = status_mib(pid, "VmRSS") {
                max_rss = Some(max_rss.map_or(rss, |m| m.max(rss)));
            }
            let caught_up = drivers
                .get(pool)
                .await?
                .status
                .and_then(|s| s.observed_generation)
                == generation;
            let sets = daemonsets.list(&ListParams::default()).await?.items;
            let rolled = sets
                .iter()
                .filter(|ds| {
                    ds.owner_references()
                        .iter()
                        .any(|o| o.kind == "NVIDIADriver" && o.name == pool)
                })
                .all(|ds| {
                    let status = ds.status.clone().unwrap_or_default();
                    ds.metadata.generation == status.observed_generation
                        && status.updated_number_scheduled.unwrap_or(0)
                            == status.desired_number_scheduled
                        && status.number_ready == status.desired_number_scheduled
                });
            let labelled = nodes.list_metadata(&done).await?.items.len() >= size;
            Ok(caught_up && rolled && labelled)
        },
    )
    .await?;
    out.duration_s = Some(started.elapsed().as_secs_f64());
    out.max_rss_mib = max_rss;
    out.cpu_s = cpu_seconds(pid, ticks).zip(cpu_before).map(|(a, b)| a - b);
    eprintln!(
        "    driver upgrade of pool {pool} ({size} nodes) done after {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok((from, Timestamp::now()))
}
