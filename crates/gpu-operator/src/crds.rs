//! `gpu-operator crds [print|apply|delete]`: the CustomResourceDefinitions this operator serves,
//! printed, server-side applied (the chart's install/upgrade hook) or deleted (its
//! `operator.cleanupCRD` hook).

use std::{io::Write as _, path::Path, time::Duration};

use anyhow::{Context as _, bail};
use clap::Subcommand;
use gpu_operator_api::{ClusterPolicy, GpuCluster, NvidiaDriver};
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
    /// Delete them, and with them every ClusterPolicy, NVIDIADriver and GPUCluster. Idempotent.
    Delete,
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
        Action::Delete => block_on(delete(kubeconfig)),
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

async fn delete(kubeconfig: Option<&Path>) -> anyhow::Result<()> {
    let api: Api<CustomResourceDefinition> =
        Api::all(gpu_operator_process::config::client(kubeconfig).await?);
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
