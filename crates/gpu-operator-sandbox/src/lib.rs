//! `SandboxWorkloadsReady`: where the sandbox (virtual-machine) stack runs. With
//! `sandboxWorkloads.enabled`, each GPU node runs the stack of its workload config (its
//! `nvidia.com/gpu.workload.config` label, else `sandboxWorkloads.defaultWorkload`): the
//! condition names the nodes of each and the sandbox operands each VM workload type gets (their
//! own operands deploy them and report their rollouts: `SandboxValidatorReady`,
//! `VfioManagerReady`, …). It is `False` (reason `NoDevicePlugin`) while VM nodes get no device
//! plugin that exposes their GPUs in the chosen mode — `kata` mode without
//! `kataSandboxDevicePlugin.enabled`, or `vm-vgpu` nodes in `kata` mode — naming the nodes and
//! the fix. `kataManager.enabled=true` is a warning: NVIDIA deprecated the Kata manager and
//! neither operator deploys it (the RuntimeClasses it made are removed with the leftovers, see
//! `gpu_operator_core::pipeline::leftovers`). Deploys nothing; not part of the overall `Ready`
//! (each sandbox operand is).

use std::collections::BTreeMap;

use gpu_operator_api::{
    ClusterPolicy, ClusterPolicySpec,
    spec::{SandboxMode, WorkloadConfig},
};
use gpu_operator_core::{
    Error,
    cache::facts::NodeSample,
    contract::{Children, Cluster, ImageEnv, Operand, Summary, Warning},
};

/// The condition this reporter owns.
pub const CONDITION: &str = "SandboxWorkloadsReady";
/// Reason while every VM node gets a device plugin.
pub const PLACED: &str = "Placed";
/// Reason while VM nodes get no device plugin.
pub const NO_DEVICE_PLUGIN: &str = "NoDevicePlugin";
/// Reason of the warning about `kataManager.enabled`.
pub const KATA_MANAGER_DEPRECATED: &str = "KataManagerDeprecated";

/// The reporter of where the sandbox stack runs.
pub struct Sandbox;

/// Which sandbox operands the ClusterPolicy deploys (each on its own nodes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(clippy::struct_excessive_bools, reason = "one switch per operand")]
pub struct Deployed {
    /// The VFIO manager (`vm-passthrough` nodes).
    pub vfio_manager: bool,
    /// The KubeVirt GPU device plugin (`kubevirt` mode, every VM node).
    pub sandbox_device_plugin: bool,
    /// The Kata sandbox device plugin (`kata` mode, `vm-passthrough` nodes).
    pub kata_device_plugin: bool,
    /// The vGPU manager (`vm-vgpu` nodes).
    pub vgpu_manager: bool,
    /// The vGPU device manager (`vm-vgpu` nodes).
    pub vgpu_device_manager: bool,
    /// The confidential-computing manager (`kata` mode, every VM node).
    pub cc_manager: bool,
}

/// What the condition says, resolved from the spec and the node facts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Input {
    /// `sandboxWorkloads.mode`.
    pub mode: SandboxMode,
    /// GPU nodes by the workload config they run.
    pub nodes: BTreeMap<WorkloadConfig, NodeSample>,
    /// The sandbox operands deployed.
    pub deployed: Deployed,
    /// `kataManager.enabled` is true.
    pub kata_manager: bool,
}

impl Operand for Sandbox {
    type Owner = ClusterPolicy;
    const NAME: &'static str = "sandbox";
    const CONDITION: &'static str = CONDITION;
    const SECTION: &'static str = "sandboxWorkloads";
    type Input = Input;
    /// Reports only: each sandbox operand's own condition counts in the overall `Ready`.
    const IN_OVERALL_READY: bool = false;
    /// The deprecated Kata manager's image, which NVIDIA's operator reads and never deploys.
    const IMAGES: &'static [ImageEnv] = &[ImageEnv {
        var: "KATA_MANAGER_IMAGE",
        chart_values: None,
    }];

    /// `Ok(None)` (the condition says disabled) without sandbox workloads.
    fn validate(spec: &ClusterPolicySpec, cluster: &Cluster<'_>) -> Result<Option<Input>, Error> {
        let Some(default) = spec.sandbox_default_workload() else {
            return Ok(None);
        };
        let mut nodes: BTreeMap<WorkloadConfig, NodeSample> = BTreeMap::new();
        for (label, sample) in &cluster.facts.gpu_nodes_by_workload {
            let config = WorkloadConfig::from_name(label).unwrap_or(default);
            nodes.entry(config).or_default().merge(sample);
        }
        Ok(Some(Input {
            mode: spec.sandbox_mode(),
            nodes,
            deployed: Deployed {
                vfio_manager: spec.vfio_manager_enabled(),
                sandbox_device_plugin: spec.sandbox_device_plugin_enabled(),
                kata_device_plugin: spec.kata_sandbox_device_plugin_enabled(),
                vgpu_manager: spec.vgpu_manager_enabled(),
                vgpu_device_manager: spec.vgpu_device_manager_enabled(),
                cc_manager: spec.cc_manager_deployed(),
            },
            kata_manager: spec.kata_manager.as_ref().and_then(|k| k.enabled) == Some(true),
        }))
    }

    /// Without sandbox workloads every GPU node runs the container stack.
    fn disabled_because(_spec: &ClusterPolicySpec, _cluster: &Cluster<'_>) -> Option<String> {
        Some(
            "sandboxWorkloads.enabled is not true: every GPU node runs the container stack"
                .to_owned(),
        )
    }

    fn render(_input: &Input) -> Children {
        Children::default()
    }

    fn summary(input: &Input) -> Option<Summary> {
        Some(summary(input))
    }

    fn warnings(input: &Input) -> Vec<Warning> {
        if !input.kata_manager {
            return Vec::new();
        }
        vec![Warning {
            reason: KATA_MANAGER_DEPRECATED,
            message: "kataManager.enabled=true is ignored: NVIDIA deprecated the Kata manager \
                      and neither its operator nor this one deploys it; the RuntimeClasses it \
                      created (label nvidia.com/kata-runtime-class=true) are removed. Install \
                      Kata's runtime classes with Kata itself and set kataManager.enabled=false"
                .to_owned(),
        }]
    }
}

/// The condition for `input`.
fn summary(input: &Input) -> Summary {
    let mode = match input.mode {
        SandboxMode::Kubevirt => "kubevirt",
        SandboxMode::Kata => "kata",
    };
    let mut parts = Vec::new();
    let mut problems = Vec::new();
    for (config, nodes) in &input.nodes {
        let who = format!("{} {}", nodes.describe(), config.as_str());
        if *config == WorkloadConfig::Container {
            parts.push(format!("{who}: the container stack"));
            continue;
        }
        let operands = operands(*config, input.mode, input.deployed);
        parts.push(format!("{who}: {}", operands.join(", ")));
        if let Some(fix) = missing_device_plugin(*config, input.mode, input.deployed) {
            problems.push(format!("{who} get no device plugin: {fix}"));
        }
    }
    if !input.nodes.keys().any(|c| *c != WorkloadConfig::Container) {
        parts.push(format!(
            "no GPU node runs VMs: label one {}=vm-passthrough or vm-vgpu, or set \
             sandboxWorkloads.defaultWorkload",
            gpu_operator_api::labels::GPU_WORKLOAD_CONFIG
        ));
    }
    let placed = format!("sandbox workloads ({mode} mode): {}", parts.join("; "));
    if problems.is_empty() {
        Summary {
            ready: true,
            reason: PLACED,
            message: placed,
        }
    } else {
        Summary {
            ready: false,
            reason: NO_DEVICE_PLUGIN,
            message: format!("{}; {placed}", problems.join("; ")),
        }
    }
}

/// The sandbox operands a node of VM workload `config` runs, as NVIDIA's node labels and states
/// place them.
fn operands(config: WorkloadConfig, mode: SandboxMode, deployed: Deployed) -> Vec<&'static str> {
    let passthrough = config == WorkloadConfig::VmPassthrough;
    let vgpu = config == WorkloadConfig::VmVgpu;
    [
        (true, "sandbox validator"),
        (passthrough && deployed.vfio_manager, "VFIO manager"),
        (vgpu && deployed.vgpu_manager, "vGPU manager"),
        (vgpu && deployed.vgpu_device_manager, "vGPU device manager"),
        (
            deployed.sandbox_device_plugin && mode == SandboxMode::Kubevirt,
            "KubeVirt device plugin",
        ),
        (
            passthrough && deployed.kata_device_plugin,
            "Kata device plugin",
        ),
        (deployed.cc_manager, "CC manager"),
    ]
    .into_iter()
    .filter_map(|(on, name)| on.then_some(name))
    .collect()
}

/// The fix when nodes of VM workload `config` get no device plugin in `mode`; `None` when they
/// get one, or in `kubevirt` mode without `sandboxDevicePlugin` (KubeVirt can be given host
/// devices without it: its `permittedHostDevices` with an external provider).
fn missing_device_plugin(
    config: WorkloadConfig,
    mode: SandboxMode,
    deployed: Deployed,
) -> Option<&'static str> {
    match (mode, config) {
        (SandboxMode::Kata, WorkloadConfig::VmPassthrough) if !deployed.kata_device_plugin => Some(
            "sandboxWorkloads.mode=kata exposes passthrough GPUs through the Kata sandbox device \
             plugin; set kataSandboxDevicePlugin.enabled=true",
        ),
        (SandboxMode::Kata, WorkloadConfig::VmVgpu) => Some(
            "in kata mode only vm-passthrough nodes get a device plugin (kataSandboxDevicePlugin.enabled); \
             label these nodes vm-passthrough, or use sandboxWorkloads.mode=kubevirt",
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
