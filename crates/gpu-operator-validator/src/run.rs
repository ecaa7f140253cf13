//! One validator run: check the component, write or remove its status file, report the Node
//! conditions, lift the startup taint when asked, and with `WITH_WAIT` repeat until it passes.

use std::{sync::Arc, time::Duration};

use gpu_operator_api::{conditions::node, validator::reason};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use tracing::{error, info, warn};

use crate::{
    components::{self, Failed, FileToWrite, Outcome},
    config::{Component, Config},
    node_conditions::{self, CudaFile, Desired, Scope},
    nvml::Nvml,
    status_files, taint,
};

/// Exit code: the component is validated (and reported, when reporting is on).
pub const EXIT_VALIDATED: u8 = 0;
/// Exit code: the check failed (NVIDIA's non-zero exit).
pub const EXIT_FAILED: u8 = 1;
/// Exit code: the configuration is invalid.
pub const EXIT_USAGE: u8 = 2;
/// Exit code: the check passed but the Node conditions could not be written.
pub const EXIT_NOT_REPORTED: u8 = 3;

/// The Node condition a component owns.
pub fn condition_type(component: Component) -> &'static str {
    match component {
        Component::Driver => node::GPU_DRIVER_READY,
        Component::Toolkit => node::GPU_TOOLKIT_READY,
        Component::Cuda => node::GPU_CUDA_READY,
        Component::Plugin => node::GPU_DEVICE_PLUGIN_READY,
        Component::VfioPci => node::GPU_VFIO_PCI_READY,
        Component::VgpuManager => node::GPU_VGPU_MANAGER_READY,
        Component::VgpuDevices => node::GPU_VGPU_DEVICES_READY,
        Component::CcManager => node::GPU_CC_MANAGER_READY,
    }
}

/// How an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Attempt {
    Done,
    Failed { permanent: bool },
    NotReported,
}

/// Runs the validator and returns its exit code.
pub async fn run(cfg: &Config, nvml: Arc<dyn Nvml>) -> u8 {
    if let Err(e) = status_files::prepare_dir(&cfg.output_dir, cfg.cleanup_all) {
        error!("{e}");
        return EXIT_FAILED;
    }
    let mut client = None;
    loop {
        let result = attempt(cfg, &nvml, &mut client).await;
        let code = match result {
            Attempt::Done => return EXIT_VALIDATED,
            Attempt::Failed { permanent } if permanent || !cfg.with_wait => return EXIT_FAILED,
            Attempt::NotReported if !cfg.with_wait => return EXIT_NOT_REPORTED,
            Attempt::Failed { .. } | Attempt::NotReported => result,
        };
        let pause = cfg.sleep_interval.max(Duration::from_millis(200));
        info!(?code, "retrying in {}s (WITH_WAIT)", pause.as_secs());
        tokio::time::sleep(pause).await;
    }
}

async fn client_if_needed(cfg: &Config, client: &mut Option<kube::Client>) -> Result<(), String> {
    let needs = cfg.report_conditions
        || cfg.component == Component::Plugin
        || cfg.component.is_sandbox()
        || (cfg.component == Component::Cuda && cfg.with_workload);
    if needs && client.is_none() {
        *client =
            Some(kube::Client::try_default().await.map_err(|e| {
                format!("no Kubernetes client (in-cluster config or KUBECONFIG): {e}")
            })?);
    }
    Ok(())
}

async fn check(cfg: &Config, nvml: &Arc<dyn Nvml>, client: Option<&kube::Client>) -> Outcome {
    let blocking = |f: Box<dyn FnOnce() -> Outcome + Send>| async move {
        tokio::task::spawn_blocking(f).await.unwrap_or_else(|e| {
            Err(Failed::new(
                reason::DRIVER_QUERY_FAILED,
                format!("the check crashed: {e}"),
            ))
        })
    };
    match (cfg.component, client) {
        (Component::Driver, _) => {
            let (cfg, nvml) = (cfg.clone(), Arc::clone(nvml));
            blocking(Box::new(move || {
                components::driver::check(&cfg, nvml.as_ref())
            }))
            .await
        }
        (Component::Toolkit, _) => {
            let cfg = cfg.clone();
            blocking(Box::new(move || components::toolkit::check(&cfg))).await
        }
        (Component::Cuda, _) if !cfg.with_workload => components::passed(
            reason::CUDA_VALIDATED,
            "CUDA workload skipped (WITH_WORKLOAD=false)",
        ),
        (Component::Cuda, Some(client)) => components::cuda::check(cfg, client).await,
        (Component::Plugin, Some(client)) => components::plugin::check(cfg, client).await,
        (
            Component::VfioPci
            | Component::VgpuManager
            | Component::VgpuDevices
            | Component::CcManager,
            Some(client),
        ) => components::sandbox::check(cfg, client).await,
        (
            Component::Cuda
            | Component::Plugin
            | Component::VfioPci
            | Component::VgpuManager
            | Component::VgpuDevices
            | Component::CcManager,
            None,
        ) => Err(Failed::new(
            reason::API_ERROR,
            "no Kubernetes client to read the node with",
        )),
    }
}

async fn attempt(cfg: &Config, nvml: &Arc<dyn Nvml>, client: &mut Option<kube::Client>) -> Attempt {
    let client_error = client_if_needed(cfg, client).await.err();
    if let Some(e) = &client_error {
        warn!("{e}");
    }
    let removed = status_files::files_of(cfg.component)
        .into_iter()
        .try_for_each(|file| status_files::remove(&cfg.output_dir, file));
    let outcome = match removed {
        Err(e) => Err(Failed::new(reason::STATUS_FILE_ERROR, e.to_string())),
        Ok(()) => match check(cfg, nvml, client.as_ref()).await {
            Ok(passed) => leave_status_file(cfg, passed),
            Err(failed) => Err(failed),
        },
    };
    match &outcome {
        Ok(p) => info!(component = %cfg.component, reason = p.reason, "validated: {}", p.message),
        Err(f) => error!(component = %cfg.component, reason = f.reason, "not ready: {}", f.message),
    }
    let reported = if cfg.report_conditions {
        match client.as_ref() {
            Some(client) => report(cfg, client, &outcome).await,
            None => Err(client_error.unwrap_or_default()),
        }
    } else {
        Ok(())
    };
    if let Err(e) = &reported {
        error!("reporting Node conditions: {e}");
    }
    match (outcome, reported) {
        (Err(f), _) => Attempt::Failed {
            permanent: f.permanent,
        },
        (Ok(_), Ok(())) => Attempt::Done,
        (Ok(_), Err(_)) => Attempt::NotReported,
    }
}

/// Writes the status file a passing check asked for (none for a sandbox component that is not
/// needed on this node).
fn leave_status_file(cfg: &Config, passed: components::Passed) -> Outcome {
    let file = match passed.file {
        FileToWrite::ComponentFile => status_files::file_name(cfg.component),
        FileToWrite::Other(name) => name,
        FileToWrite::Nothing => return Ok(passed),
    };
    status_files::write(&cfg.output_dir, file, &passed.status_file)
        .map(|()| passed)
        .map_err(|e| Failed::new(reason::STATUS_FILE_ERROR, e.to_string()))
}

/// Writes this run's condition and (for the container stack) `GPUStackReady`, then lifts the
/// startup taint if asked and the stack is ready.
async fn report(cfg: &Config, client: &kube::Client, outcome: &Outcome) -> Result<(), String> {
    let name = cfg.node_name.as_deref().unwrap_or_default();
    let type_ = condition_type(cfg.component);
    let own = match outcome {
        Ok(p) => Desired::new(type_, true, p.reason, &p.message),
        Err(f) => Desired::new(type_, false, f.reason, &f.message),
    };
    let scope = if cfg.component.is_sandbox() {
        Scope::OwnOnly
    } else if cfg
        .output_dir
        .join(status_files::file_name(Component::Cuda))
        .exists()
    {
        Scope::WithStack(CudaFile::Ready)
    } else {
        Scope::WithStack(CudaFile::Absent)
    };
    let nodes: Api<Node> = Api::all(client.clone());
    let ready = node_conditions::report(&nodes, name, &own, scope)
        .await
        .map_err(|e| e.to_string())?;
    if ready && cfg.lift_startup_taint {
        taint::lift(&nodes, name).await.map_err(|e| e.to_string())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Fixture;

    #[test]
    fn each_component_owns_its_condition() {
        let types: Vec<_> = Component::ALL.into_iter().map(condition_type).collect();
        assert_eq!(
            types,
            [
                "GPUDriverReady",
                "GPUToolkitReady",
                "GPUCudaReady",
                "GPUDevicePluginReady",
                "GPUVfioPciReady",
                "GPUVgpuManagerReady",
                "GPUVgpuDevicesReady",
                "GPUCcManagerReady",
            ]
        );
    }

    fn passing(file: FileToWrite) -> components::Passed {
        components::Passed {
            reason: "VgpuManagerValidated",
            message: String::new(),
            status_file: String::new(),
            file,
        }
    }

    #[test]
    fn a_pass_leaves_the_file_it_names_or_none() {
        let mut f = Fixture::new("vgpu-manager");
        f.set("NODE_NAME", "n");
        let cfg = f.config();
        let dir = f.dir.path().join("validations");
        leave_status_file(&cfg, passing(FileToWrite::Other("host-vgpu-manager-ready"))).unwrap();
        assert!(dir.join("host-vgpu-manager-ready").is_file());
        assert!(!dir.join("vgpu-manager-ready").exists());
        leave_status_file(&cfg, passing(FileToWrite::ComponentFile)).unwrap();
        assert!(dir.join("vgpu-manager-ready").is_file());
        std::fs::remove_file(dir.join("vgpu-manager-ready")).unwrap();
        std::fs::remove_file(dir.join("host-vgpu-manager-ready")).unwrap();
        leave_status_file(&cfg, passing(FileToWrite::Nothing)).unwrap();
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    }
}
