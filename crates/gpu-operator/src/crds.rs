//! `gpu-operator crds [print|apply|delete]`: the CustomResourceDefinitions this operator serves,
//! printed, server-side applied (the chart's install/upgrade hook) or deleted (its
//! `operator.cleanupCRD` hook).
//!
//! Deleting comes after the GPUCluster's teardown: a GPUCluster deleted with its CRD, while the
//! operator that holds its finalizer is being uninstalled, would keep its finalizer with nobody to
//! remove it (and claims could stay prepared with their driver gone). So `delete` first deletes
//! the GPUCluster and waits, a bounded time, until the running operator has torn the DRA stack
//! down; if it is still waiting (for claims) then, nothing is deleted and the command fails with
//! the GPUCluster's own `Ready` message: the uninstall stops there, the operator keeps running,
//! and the uninstall can be run again once the workloads it names are gone.

use std::{io::Write as _, path::Path, time::Duration};

use anyhow::{Context as _, bail};
use clap::Subcommand;
use gpu_operator_api::{ClusterPolicy, GpuCluster, NvidiaDriver, gpu_cluster};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    Api, CustomResourceExt as _, ResourceExt as _,
    api::{DeleteParams, Patch, PatchParams},
    runtime::{conditions, wait::await_condition},
};

/// Field manager of `crds apply`.
const FIELD_MANAGER: &str = "gpu-operator/crds";
/// How long `crds apply` waits for the API server to serve an applied CRD.
const ESTABLISH_TIMEOUT: Duration = Duration::from_secs(60);

/// What to do with the CRDs.
#[derive(Subcommand, Clone, Copy, Debug)]
pub enum Action {
    /// Print them as YAML (the default).
    Print,
    /// Create or update them with server-side apply and wait until they are served. Idempotent.
    Apply,
    /// Delete them, and with them every ClusterPolicy, NVIDIADriver and GPUCluster, the
    /// GPUCluster's teardown first (see the module header). Idempotent.
    Delete {
        /// How long to wait for the GPUCluster's teardown before giving up (seconds). The
        /// chart's hook Job is retried three times within Helm's default 5-minute timeout.
        #[arg(long, default_value_t = 45)]
        teardown_timeout: u64,
    },
}

/// Runs `action` (print when `None`); `kubeconfig` as for `gpu-operator run`.
pub fn main(action: Option<Action>, kubeconfig: Option<&Path>) -> anyhow::Result<()> {
    match action.unwrap_or(Action::Print) {
        Action::Print => {
            let yaml = format!(
                "{}---\n{}---\n{}---\n{}",
                gpu_operator_api::crd_yaml()?,
                gpu_operator_api::nvidia_driver_crd_yaml()?,
                gpu_operator_api::gpu_cluster_crd_yaml()?,
                gpu_operator_api::compute_domain_crds_yaml()?
            );
            std::io::stdout().lock().write_all(yaml.as_bytes())?;
            Ok(())
        }
        Action::Apply => block_on(apply(kubeconfig)),
        Action::Delete { teardown_timeout } => {
            block_on(delete(kubeconfig, Duration::from_secs(teardown_timeout)))
        }
    }
}

/// The CRDs this operator serves (ClusterPolicy, NVIDIADriver and GPUCluster) and the DRA
/// driver's (ComputeDomain, ComputeDomainClique), which NVIDIA's chart installs with them.
fn crds() -> anyhow::Result<[CustomResourceDefinition; 5]> {
    use gpu_operator_api::compute_domain;
    Ok([
        ClusterPolicy::crd(),
        NvidiaDriver::crd(),
        GpuCluster::crd(),
        compute_domain::compute_domain_crd()?,
        compute_domain::compute_domain_clique_crd()?,
    ])
}

fn block_on(work: impl Future<Output = anyhow::Result<()>>) -> anyhow::Result<()> {
    tokio::runtime::Runtime::new()
        .context("starting the async runtime")?
        .block_on(work)
}

async fn apply(kubeconfig: Option<&Path>) -> anyhow::Result<()> {
    let api: Api<CustomResourceDefinition> =
        Api::all(gpu_operator_process::config::client(kubeconfig).await?);
    for crd in crds()? {
        let name = crd.name_any();
        let before = api
            .get_opt(&name)
            .await
            .with_context(|| format!("reading CRD {name}"))?
            .and_then(|live| live.resource_version());
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let applied = api
            .patch(&name, &params, &Patch::Apply(&crd))
            .await
            .with_context(|| format!("applying CRD {name} (server-side apply)"))?;
        let outcome = match before {
            None => "created",
            Some(version) if applied.resource_version().as_ref() == Some(&version) => "unchanged",
            Some(_) => "updated",
        };
        let established = await_condition(api.clone(), &name, conditions::is_crd_established());
        match tokio::time::timeout(ESTABLISH_TIMEOUT, established).await {
            Ok(result) => {
                result.with_context(|| format!("waiting for CRD {name} to be established"))?;
            }
            Err(_) => bail!(
                "CRD {name} was applied but is not Established after {ESTABLISH_TIMEOUT:?}; see `kubectl describe crd {name}`"
            ),
        }
        println!("customresourcedefinition {name} {outcome}");
    }
    Ok(())
}

async fn delete(kubeconfig: Option<&Path>, teardown_timeout: Duration) -> anyhow::Result<()> {
    let client = gpu_operator_process::config::client(kubeconfig).await?;
    tear_down_gpu_cluster(&client, teardown_timeout).await?;
    let api: Api<CustomResourceDefinition> = Api::all(client);
    for crd in crds()? {
        let name = crd.name_any();
        match api.delete(&name, &DeleteParams::background()).await {
            Ok(_) => println!("customresourcedefinition {name} deleted"),
            Err(kube::Error::Api(status)) if status.is_not_found() => {
                println!("customresourcedefinition {name} not found (already deleted)");
            }
            Err(error) => return Err(error).with_context(|| format!("deleting CRD {name}")),
        }
    }
    Ok(())
}

/// Deletes the GPUCluster, if there is one, and waits up to `timeout` until its teardown has
/// removed it (see the module header).
async fn tear_down_gpu_cluster(client: &kube::Client, timeout: Duration) -> anyhow::Result<()> {
    let api: Api<GpuCluster> = Api::all(client.clone());
    // Also `None` where the GPUCluster CRD is not installed.
    let Some(cluster) = api
        .get_opt(gpu_cluster::NAME)
        .await
        .context("reading the GPUCluster")?
    else {
        return Ok(());
    };
    match api
        .delete(gpu_cluster::NAME, &DeleteParams::background())
        .await
    {
        Ok(_) => println!(
            "gpucluster {} deleted, waiting for its teardown",
            gpu_cluster::NAME
        ),
        Err(kube::Error::Api(status)) if status.is_not_found() => return Ok(()),
        Err(error) => return Err(error).context("deleting the GPUCluster"),
    }
    let uid = cluster.uid().unwrap_or_default();
    let gone = await_condition(api.clone(), gpu_cluster::NAME, conditions::is_deleted(&uid));
    if let Ok(result) = tokio::time::timeout(timeout, gone).await {
        result.context("waiting for the GPUCluster's teardown")?;
        return Ok(());
    }
    let live = api.get_opt(gpu_cluster::NAME).await.ok().flatten();
    bail!("{}", still_tearing_down(live.as_ref(), timeout))
}

/// Why `crds delete` gave up: the GPUCluster's own `Ready` message while it says its teardown
/// (it names the claims it waits for), and what to do.
fn still_tearing_down(cluster: Option<&GpuCluster>, waited: Duration) -> String {
    const TEARDOWN_REASONS: [&str; 2] = ["WaitingForClaims", "TearingDown"];
    let ready = cluster
        .and_then(|c| c.status.as_ref())
        .and_then(|s| s.conditions.as_deref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .filter(|c| TEARDOWN_REASONS.contains(&c.reason.as_str()))
        .map_or(
            "its teardown has not reported yet: is the operator running?",
            |c| c.message.as_str(),
        );
    format!(
        "the GPUCluster {} is still being torn down after {}s ({ready}), so no CRD was \
         deleted and the operator keeps running to finish it; once its workloads are gone, run \
         the uninstall again",
        gpu_cluster::NAME,
        waited.as_secs()
    )
}

#[cfg(test)]
mod tests {
    use gpu_operator_api::{GpuClusterSpec, GpuClusterStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

    use super::*;

    #[test]
    fn giving_up_on_the_teardown_passes_on_what_the_gpu_cluster_waits_for() {
        let mut cluster = GpuCluster::new(gpu_cluster::NAME, GpuClusterSpec::default());
        let waited = Duration::from_secs(45);
        let not_yet = "(its teardown has not reported yet: is the operator running?)";
        assert!(still_tearing_down(Some(&cluster), waited).contains(not_yet));
        cluster.status = Some(GpuClusterStatus {
            conditions: Some(vec![Condition {
                type_: "Ready".to_owned(),
                status: "False".to_owned(),
                reason: "WaitingForClaims".to_owned(),
                message: "waiting for 1 claim: team-a/train-gpu (pod team-a/train)".to_owned(),
                last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                ),
                observed_generation: None,
            }]),
            ..GpuClusterStatus::default()
        });
        let message = still_tearing_down(Some(&cluster), waited);
        assert!(
            message.contains("after 45s (waiting for 1 claim: team-a/train-gpu"),
            "{message}"
        );
        assert!(message.contains("no CRD was deleted"), "{message}");
    }
}
