//! The Node conditions the validator owns (`GPUDriverReady`, `GPUToolkitReady`, `GPUCudaReady`,
//! `GPUDevicePluginReady`, `GPUStackReady`, and the sandbox components' `GPUVfioPciReady`,
//! `GPUVgpuManagerReady`, `GPUVgpuDevicesReady`, `GPUCcManagerReady`): pure functions that derive
//! `GPUStackReady` and merge new results into the node's conditions, and the resourceVersion-guarded
//! strategic merge patch of `nodes/status` that writes only our types and is skipped when nothing
//! changed.

use gpu_operator_api::{conditions::node, validator::reason};
use k8s_openapi::{
    api::core::v1::{Node, NodeCondition},
    apimachinery::pkg::apis::meta::v1::Time,
    jiff::Timestamp,
};
use kube::{
    Api,
    api::{Patch, PatchParams},
};
use serde_json::json;

/// Field manager of the validator's node writes (conditions, the summary annotation, the lifted
/// startup taint), so the uninstall cleanup finds them by their owner.
pub const FIELD_MANAGER: &str = "gpu-operator/validator";

/// The patch parameters of every node write of the validator.
pub fn patch_params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    }
}

/// Longest message written into a condition.
const MAX_MESSAGE: usize = 1024;

/// A condition we want on the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Desired {
    /// One of [`node`]'s types.
    pub type_: &'static str,
    /// True or False.
    pub ready: bool,
    /// PascalCase reason.
    pub reason: String,
    /// Human-readable detail.
    pub message: String,
}

impl Desired {
    /// A condition with `message` cut to a reasonable length.
    pub fn new(type_: &'static str, ready: bool, reason: &str, message: &str) -> Self {
        Self {
            type_,
            ready,
            reason: reason.to_owned(),
            message: gpu_operator_api::conditions::truncate(message, MAX_MESSAGE),
        }
    }

    fn status(&self) -> &'static str {
        if self.ready { "True" } else { "False" }
    }
}

/// What the `cuda-ready` status file says when the node has no `GPUCudaReady` yet (a validator
/// of an earlier release passed the CUDA check without writing that condition).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CudaFile {
    /// `cuda-ready` exists: the CUDA check passed.
    Ready,
    /// It does not (yet).
    Absent,
}

/// Which conditions a run writes besides its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// A container-stack component: also `GPUStackReady`, derived with this run's result.
    WithStack(CudaFile),
    /// A sandbox component: only its own condition (the container stack is not its business).
    OwnOnly,
}

/// The conditions a run wants on the node: `own`, then `GPUStackReady` when `scope` says so.
pub fn desired(existing: &[NodeCondition], own: &Desired, scope: Scope) -> Vec<Desired> {
    match scope {
        Scope::WithStack(cuda_file) => vec![own.clone(), stack(existing, Some(own), cuda_file)],
        Scope::OwnOnly => vec![own.clone()],
    }
}

fn find<'a>(conditions: &'a [NodeCondition], type_: &str) -> Option<&'a NodeCondition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// `GPUStackReady` from the node's current conditions overlaid with `own` (this run's result):
/// True when driver, toolkit, CUDA and device plugin all passed; else the first failure in stack
/// order, or the components still pending.
pub fn stack(existing: &[NodeCondition], own: Option<&Desired>, cuda_file: CudaFile) -> Desired {
    let state = |type_: &str| -> Option<(bool, String, String)> {
        if let Some(d) = own.filter(|d| d.type_ == type_) {
            return Some((d.ready, d.reason.clone(), d.message.clone()));
        }
        let c = find(existing, type_).filter(|c| c.status != "Unknown")?;
        Some((
            c.status == "True",
            c.reason.clone().unwrap_or_default(),
            c.message.clone().unwrap_or_default(),
        ))
    };
    let steps = [
        (node::GPU_DRIVER_READY, reason::DRIVER_NOT_READY),
        (node::GPU_TOOLKIT_READY, reason::TOOLKIT_NOT_READY),
        (node::GPU_CUDA_READY, reason::CUDA_NOT_READY),
        (
            node::GPU_DEVICE_PLUGIN_READY,
            reason::DEVICE_PLUGIN_NOT_READY,
        ),
    ];
    let mut pending = Vec::new();
    for (type_, not_ready) in steps {
        let current = state(type_).or_else(|| {
            (type_ == node::GPU_CUDA_READY && cuda_file == CudaFile::Ready)
                .then(|| (true, String::new(), String::new()))
        });
        match current {
            Some((true, ..)) => {}
            Some((false, r, m)) => {
                return Desired::new(
                    node::GPU_STACK_READY,
                    false,
                    not_ready,
                    &format!("{type_} failed ({r}): {m}"),
                );
            }
            None => pending.push(type_),
        }
    }
    if !pending.is_empty() {
        return Desired::new(
            node::GPU_STACK_READY,
            false,
            reason::VALIDATION_PENDING,
            &format!("not validated yet: {}", pending.join(", ")),
        );
    }
    let driver = state(node::GPU_DRIVER_READY)
        .map(|(_, _, m)| m)
        .unwrap_or_default();
    Desired::new(
        node::GPU_STACK_READY,
        true,
        reason::STACK_READY,
        &format!("driver, toolkit, CUDA and device plugin validated; {driver}"),
    )
}

/// The conditions to write: each desired one that differs from the node's in status, reason or
/// message. `lastTransitionTime` is kept unless the status flips. Empty: skip the patch.
pub fn merge(existing: &[NodeCondition], desired: &[Desired], now: &Time) -> Vec<NodeCondition> {
    desired
        .iter()
        .filter_map(|d| {
            let old = find(existing, d.type_);
            let unchanged = old.is_some_and(|o| {
                o.status == d.status()
                    && o.reason.as_deref() == Some(d.reason.as_str())
                    && o.message.as_deref() == Some(d.message.as_str())
            });
            if unchanged {
                return None;
            }
            let transition = old
                .filter(|o| o.status == d.status())
                .and_then(|o| o.last_transition_time.clone())
                .unwrap_or_else(|| now.clone());
            Some(NodeCondition {
                type_: d.type_.to_owned(),
                status: d.status().to_owned(),
                reason: Some(d.reason.clone()),
                message: Some(d.message.clone()),
                last_heartbeat_time: Some(now.clone()),
                last_transition_time: Some(transition),
            })
        })
        .collect()
}

/// The strategic merge patch of `nodes/status`: conditions merge by `type`, so kubelet's stay
/// untouched; the resourceVersion makes a concurrent change fail with 409 instead of racing.
pub fn patch_body(changed: &[NodeCondition], resource_version: &str) -> serde_json::Value {
    json!({
        "metadata": {"resourceVersion": resource_version},
        "status": {"conditions": changed},
    })
}

/// The current time, to the second (as the API server stores it).
pub fn now() -> Time {
    Time(Timestamp::from_second(Timestamp::now().as_second()).unwrap_or(Timestamp::UNIX_EPOCH))
}

/// Writing the conditions failed.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The API server refused or could not be reached.
    #[error("{action} node {node}: {}", crate::components::api_error(source))]
    Api {
        /// What was done.
        action: &'static str,
        /// The node.
        node: String,
        /// The client's error.
        source: kube::Error,
    },
    /// Others kept changing the node.
    #[error("node {0} kept changing; gave up after {1} conflicting patches")]
    Conflicts(String, usize),
}

impl ReportError {
    /// Wraps a client error of `action` on node `node`.
    pub fn api(action: &'static str, node: &str) -> impl FnOnce(kube::Error) -> Self {
        let node = node.to_owned();
        move |source| Self::Api {
            action,
            node,
            source,
        }
    }
}

/// Attempts at a resourceVersion-guarded write before giving up.
pub const ATTEMPTS: usize = 5;

/// Whether an error is a 409 Conflict.
pub fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// Writes `own` (this component's condition) and, in [`Scope::WithStack`], the derived
/// `GPUStackReady` to the node; returns whether the stack is ready (never in [`Scope::OwnOnly`]).
pub async fn report(
    nodes: &Api<Node>,
    name: &str,
    own: &Desired,
    scope: Scope,
) -> Result<bool, ReportError> {
    let api = |action| ReportError::api(action, name);
    for _ in 0..ATTEMPTS {
        let node = nodes.get(name).await.map_err(api("getting"))?;
        let existing = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default();
        let desired = desired(&existing, own, scope);
        let stack_ready = desired
            .iter()
            .any(|d| d.type_ == node::GPU_STACK_READY && d.ready);
        let changed = merge(&existing, &desired, &now());
        if changed.is_empty() {
            tracing::debug!(node = name, "Node conditions unchanged, no patch");
            crate::summary::annotate(nodes, &node, &existing).await?;
            return Ok(stack_ready);
        }
        let rv = node.metadata.resource_version.clone().unwrap_or_default();
        let body = patch_body(&changed, &rv);
        match nodes
            .patch_status(name, &patch_params(), &Patch::Strategic(body))
            .await
        {
            Ok(_) => {
                tracing::info!(
                    node = name,
                    condition = own.type_,
                    stack_ready,
                    "Node conditions written"
                );
                crate::summary::annotate(
                    nodes,
                    &node,
                    &crate::summary::merged(&existing, &changed),
                )
                .await?;
                return Ok(stack_ready);
            }
            Err(e) if is_conflict(&e) => {}
            Err(e) => return Err(api("patching the status of")(e)),
        }
    }
    Err(ReportError::Conflicts(name.to_owned(), ATTEMPTS))
}

#[cfg(test)]
mod tests;
