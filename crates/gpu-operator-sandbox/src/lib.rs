//! What we do not deploy, said out loud: NVIDIA's sandbox (virtual-machine) workloads — the vGPU
//! device manager and the Kata manager — are accepted in the ClusterPolicy, so nothing is pruned,
//! but this operator deploys none of them; of the sandbox operands it deploys only the vGPU
//! manager, the sandbox validator, the VFIO manager, the sandbox device plugins and the CC
//! manager (their own operands, `gpu-operator-vgpu-manager`, `gpu-operator-sandbox-validator`,
//! `gpu-operator-vfio-manager`, `gpu-operator-sandbox-device-plugin` and
//! `gpu-operator-cc-manager`, not reported here).
//! (`psa.enabled` is no longer among them: see `gpu_operator_status::pod_security`.) When the
//! ClusterPolicy asks for them, the `SandboxWorkloadsReady` condition is `False` (reason
//! `NotSupported`) and one Warning Event names each setting and the GPU nodes labelled for a VM
//! workload type, which get no container stack and, but for those deployed operands, no sandbox
//! operand either.
//! Nothing running is touched.
//! Not part of the overall `Ready`: the container stack is unaffected.

use std::fmt::Write as _;

use gpu_operator_api::{ClusterPolicy, ClusterPolicySpec, spec::WorkloadConfig};
use gpu_operator_core::{
    Error,
    cache::facts::NodeSample,
    contract::{Children, Cluster, ImageEnv, Operand},
};

/// The condition this reconciler owns.
pub const CONDITION: &str = "SandboxWorkloadsReady";

/// The reporter of settings we do not deploy.
pub struct Sandbox;

/// What the ClusterPolicy asks for that is not deployed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Input {
    /// The settings, as `path=value`.
    pub settings: Vec<String>,
    /// GPU nodes of a VM workload type, by type (`vm-passthrough`, `vm-vgpu`): their
    /// `nvidia.com/gpu.workload.config` label, or `sandboxWorkloads.defaultWorkload` without one;
    /// with the sandbox operands deployed on them, as `a, b and c only`.
    pub vm_nodes: Vec<(String, NodeSample, String)>,
}

impl Operand for Sandbox {
    type Owner = ClusterPolicy;
    const NAME: &'static str = "sandbox";
    const CONDITION: &'static str = CONDITION;
    const SECTION: &'static str = "sandboxWorkloads";
    type Input = Input;
    /// Reports only: the container stack is ready without it.
    const IN_OVERALL_READY: bool = false;
    /// The images of the sections reported here, read as NVIDIA's operator reads them (none is
    /// deployed).
    const IMAGES: &'static [ImageEnv] = &[
        ImageEnv {
            var: "VGPU_DEVICE_MANAGER_IMAGE",
            chart_values: Some("vgpuDeviceManager"),
        },
        ImageEnv {
            var: "KATA_MANAGER_IMAGE",
            chart_values: None,
        },
    ];

    /// `Ok(None)` (the condition says disabled) when nothing unsupported is asked for.
    fn validate(spec: &ClusterPolicySpec, cluster: &Cluster<'_>) -> Result<Option<Input>, Error> {
        let settings = unsupported_settings(spec);
        if settings.is_empty() {
            return Ok(None);
        }
        let sandbox = spec
            .sandbox_workloads
            .as_ref()
            .filter(|s| s.enabled == Some(true));
        let default = sandbox.and_then(|s| s.default_workload).unwrap_or_default();
        let vm_nodes = cluster
            .facts
            .gpu_nodes_by_workload
            .iter()
            .filter(|_| sandbox.is_some())
            .filter_map(|(label, nodes)| {
                let kind = if label.is_empty() {
                    default.as_str()
                } else {
                    label.as_str()
                };
                (kind != "container")
                    .then(|| (kind.to_owned(), nodes.clone(), operands_of(spec, kind)))
            })
            .collect();
        Ok(Some(Input { settings, vm_nodes }))
    }

    fn render(_input: &Input) -> Children {
        Children::default()
    }

    fn not_deployed(input: &Input) -> Option<String> {
        let mut message = format!(
            "{} accepted but not supported by this operator: it deploys the container stack \
             and, of the sandbox (virtual-machine) operands, the vGPU manager, the sandbox \
             validator, the VFIO manager, the sandbox device plugins and the CC manager only",
            input.settings.join(", ")
        );
        for (kind, nodes, operands) in &input.vm_nodes {
            let _ = write!(
                message,
                "; {} labelled for workload type {kind} get {operands}",
                nodes.describe()
            );
        }
        message.push_str(
            "; to run containers there, label the nodes nvidia.com/gpu.workload.config=container \
             (or set sandboxWorkloads.enabled=false); for VM workloads use NVIDIA's GPU Operator",
        );
        Some(message)
    }
}

/// The sandbox operands deployed on VM nodes of workload type `kind`, as `a, b and c only`.
fn operands_of(spec: &ClusterPolicySpec, kind: &str) -> String {
    let passthrough = kind == WorkloadConfig::VmPassthrough.as_str();
    let vgpu = kind == WorkloadConfig::VmVgpu.as_str();
    deployed(&[
        (vgpu && spec.vgpu_manager_enabled(), "the vGPU manager"),
        // VM nodes are listed only with sandbox workloads on, which deploy it everywhere.
        (true, "the sandbox validator"),
        (
            passthrough && spec.vfio_manager_enabled(),
            "the VFIO manager",
        ),
        (
            spec.sandbox_device_plugin_enabled()
                || (passthrough && spec.kata_sandbox_device_plugin_enabled()),
            "the sandbox device plugin",
        ),
        (spec.cc_manager_deployed(), "the CC manager"),
    ])
}

/// `operands` that are deployed, as `a, b and c only`, or `no GPU operands`.
fn deployed(operands: &[(bool, &str)]) -> String {
    let names: Vec<&str> = operands
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, name)| *name)
        .collect();
    match names.as_slice() {
        [] => "no GPU operands".to_owned(),
        [one] => format!("{one} only"),
        [rest @ .., last] => format!("{} and {last} only", rest.join(", ")),
    }
}

/// The settings NVIDIA's operator would act on and we do not, in spec order (`vgpuManager`,
/// `vfioManager`, `sandboxDevicePlugin`, `kataSandboxDevicePlugin` and `ccManager`, which their
/// own operands deploy, are not among them).
fn unsupported_settings(spec: &ClusterPolicySpec) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(sandbox) = spec
        .sandbox_workloads
        .as_ref()
        .filter(|s| s.enabled == Some(true))
    {
        out.push("sandboxWorkloads.enabled=true".to_owned());
        if let Some(workload) = sandbox
            .default_workload
            .filter(|w| *w != WorkloadConfig::Container)
        {
            out.push(format!(
                "sandboxWorkloads.defaultWorkload={}",
                workload.as_str()
            ));
        }
        if sandbox.mode == Some(gpu_operator_api::spec::SandboxMode::Kata) {
            out.push("sandboxWorkloads.mode=kata".to_owned());
        }
        let components = [
            (
                "vgpuDeviceManager",
                spec.vgpu_device_manager.as_ref().and_then(|c| c.enabled),
            ),
            (
                "kataManager",
                spec.kata_manager.as_ref().and_then(|c| c.enabled),
            ),
        ];
        out.extend(
            components
                .into_iter()
                .filter(|(_, enabled)| *enabled == Some(true))
                .map(|(section, _)| format!("{section}.enabled=true")),
        );
    }
    out
}

#[cfg(test)]
mod tests;
