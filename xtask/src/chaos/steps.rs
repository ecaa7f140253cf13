//! The actions and waits the chaos scenarios share: reading, changing and deleting the
//! ClusterPolicy, SIGKILLing the operator, and waiting for its first DaemonSet or until everything
//! has converged.

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use gpu_operator_api::ClusterPolicy;
use gpu_operator_harness::operator::Operator;
use k8s_openapi::api::{apps::v1::DaemonSet, coordination::v1::Lease};
use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams},
};

use super::{
    kills::{NAMESPACE, POLICY},
    snapshot,
};
use crate::bench::{patches, run::is_ready};

/// The Lease the operator's candidates compete for: NVIDIA's operator's name for it, which ours
/// keeps so the two exclude each other.
pub const LEASE: &str = "53822513.nvidia.com";
/// The DaemonSet every change of the series updates (see [`patches`]).
pub const PLUGIN: &str = "nvidia-device-plugin-daemonset";
/// How long one convergence may take on the small fleet (a restart waits out the dead
/// process's Lease first).
pub const CONVERGE_TIMEOUT: Duration = Duration::from_secs(180);

/// Patches the ClusterPolicy with the `i`-th change of the bench's series.
pub async fn apply_change(client: &kube::Client, i: usize) -> anyhow::Result<()> {
    let (body, what) = patches::patch(i);
    Api::<ClusterPolicy>::all(client.clone())
        .patch(POLICY, &PatchParams::default(), &Patch::Merge(&body))
        .await
        .with_context(|| format!("patching the ClusterPolicy ({what})"))?;
    Ok(())
}

/// Deletes the ClusterPolicy and waits until the garbage collector has removed every object and
/// pod of ours, so the next rollout starts from nothing.
pub async fn delete_everything(client: &kube::Client) -> anyhow::Result<()> {
    match Api::<ClusterPolicy>::all(client.clone())
        .delete(POLICY, &DeleteParams::foreground())
        .await
    {
        // None yet (a scenario run alone with `--only`).
        Err(kube::Error::Api(status)) if status.code == 404 => {}
        result => {
            result?;
        }
    }
    let deadline = Instant::now() + CONVERGE_TIMEOUT;
    loop {
        let gone = Api::<ClusterPolicy>::all(client.clone())
            .get_opt(POLICY)
            .await?
            .is_none()
            && snapshot::generations(client, NAMESPACE).await?.is_empty()
            && snapshot::pods(client, NAMESPACE).await?.is_empty();
        if gone {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "the operands were not gone {CONVERGE_TIMEOUT:?} after deleting the ClusterPolicy"
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Kills the operator with SIGKILL (no graceful shutdown, no Lease release) and reaps it.
pub fn sigkill(operator: &mut Operator) -> anyhow::Result<()> {
    crate::process::run(
        std::process::Command::new("kill").args(["-KILL", &operator.pid().to_string()]),
    )?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while operator.is_running() {
        if Instant::now() > deadline {
            bail!("the operator outlived SIGKILL by 10 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

pub async fn plugin_generation(client: &kube::Client) -> anyhow::Result<i64> {
    Ok(Api::<DaemonSet>::namespaced(client.clone(), NAMESPACE)
        .get_opt(PLUGIN)
        .await?
        .and_then(|ds| ds.metadata.generation)
        .unwrap_or_default())
}

/// Waits until the ClusterPolicy is `ready`, every DaemonSet of ours is rolled out, and (after a
/// change) the device plugin DaemonSet moved past `plugin_floor`.
pub async fn converge(
    client: &kube::Client,
    operator: &mut Operator,
    plugin_floor: Option<i64>,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + CONVERGE_TIMEOUT;
    loop {
        let ready = Api::<ClusterPolicy>::all(client.clone())
            .get_opt(POLICY)
            .await
            .ok()
            .flatten()
            .is_some_and(|p| is_ready(&p));
        let changed = match plugin_floor {
            Some(floor) => plugin_generation(client).await.is_ok_and(|g| g > floor),
            None => true,
        };
        if ready
            && changed
            && snapshot::daemonsets_rolled_out(client, NAMESPACE)
                .await
                .unwrap_or(false)
        {
            return Ok(());
        }
        if !operator.is_running() {
            bail!(
                "the operator exited before converging; its log ends:\n{}",
                operator.log_tail()
            );
        }
        if Instant::now() > deadline {
            bail!(
                "not converged {CONVERGE_TIMEOUT:?} after the restart; the operator's log ends:\n{}",
                operator.log_tail()
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Waits until the operator's Lease has a holder that `accept`s and returns its identity
/// (`<POD_NAME>_<pid><start time>`, both in hex).
pub async fn wait_for_holder(
    client: &kube::Client,
    accept: impl Fn(&str) -> bool,
) -> anyhow::Result<String> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    let deadline = Instant::now() + CONVERGE_TIMEOUT;
    loop {
        let holder = leases
            .get_opt(LEASE)
            .await
            .ok()
            .flatten()
            .and_then(|l| l.spec?.holder_identity);
        if let Some(holder) = holder.filter(|h| accept(h)) {
            return Ok(holder);
        }
        if Instant::now() > deadline {
            bail!("no expected holder of the Lease {LEASE} within {CONVERGE_TIMEOUT:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The ClusterPolicy every scenario rolls out: `manifests/examples/minimal.yaml`.
pub fn minimal_policy() -> anyhow::Result<ClusterPolicy> {
    let path = gpu_operator_harness::crd::repo_root().join("manifests/examples/minimal.yaml");
    serde_yaml::from_str(&std::fs::read_to_string(&path)?)
        .with_context(|| format!("reading {}", path.display()))
}

/// Waits until the operator has created at least one DaemonSet: a moment into a rollout.
pub async fn wait_until_a_daemonset_exists(client: &kube::Client) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while snapshot::generations(client, NAMESPACE).await?.is_empty() {
        if Instant::now() > deadline {
            bail!("the operator created no DaemonSet within a minute of the ClusterPolicy");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}
