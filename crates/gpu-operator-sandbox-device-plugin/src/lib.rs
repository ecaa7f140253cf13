//! The sandbox device plugins (sandbox workloads only, as NVIDIA's), two operands of one shape:
//! the KubeVirt GPU device plugin (DaemonSet `nvidia-sandbox-device-plugin-daemonset` on nodes
//! labelled `nvidia.com/gpu.deploy.sandbox-device-plugin=true`, `kubevirt` mode) and the Kata
//! sandbox device plugin (DaemonSet `nvidia-kata-sandbox-device-plugin-daemonset` on nodes
//! labelled `nvidia.com/gpu.deploy.kata-sandbox-device-plugin=true`, `kata` mode), each with its
//! ServiceAccount and RBAC. They advertise the GPUs (or vGPUs) of VM nodes to the kubelet once the
//! sandbox validator has found them bound to `vfio-pci` (or the vGPU devices created). Deployed
//! when `sandboxWorkloads.enabled`, the matching `sandboxWorkloads.mode` and the section's
//! `enabled` are all on. Pure validate and render steps.

mod flavor;
mod render;
mod validate;

use gpu_operator_api::{
    ClusterPolicy, ClusterPolicySpec,
    conditions::operand::{KATA_SANDBOX_DEVICE_PLUGIN_READY, SANDBOX_DEVICE_PLUGIN_READY},
    spec::SandboxMode,
};
use gpu_operator_core::{
    Error,
    contract::{Children, Cluster, ImageEnv, Operand},
};

pub use flavor::Flavor;
pub use validate::Input;

/// The KubeVirt GPU device plugin operand (`sandboxDevicePlugin`).
pub struct SandboxDevicePlugin;

/// The Kata sandbox device plugin operand (`kataSandboxDevicePlugin`).
pub struct KataSandboxDevicePlugin;

/// Why a flavor is not deployed although its section may be on: sandbox workloads off, or the
/// other mode.
fn disabled_because(spec: &ClusterPolicySpec, flavor: &Flavor) -> Option<String> {
    if !spec.sandbox_enabled() {
        return Some(format!(
            "sandboxWorkloads.enabled is not true: the {} runs only for sandbox workloads, \
             nothing deployed",
            flavor.title
        ));
    }
    let mode = spec.sandbox_mode();
    (mode != flavor.mode).then(|| {
        format!(
            "sandboxWorkloads.mode is {}: the {} runs only in {} mode, nothing deployed",
            mode_name(mode),
            flavor.title,
            mode_name(flavor.mode)
        )
    })
}

/// NVIDIA's name of a sandbox mode.
const fn mode_name(mode: SandboxMode) -> &'static str {
    match mode {
        SandboxMode::Kubevirt => "kubevirt",
        SandboxMode::Kata => "kata",
    }
}

impl Operand for SandboxDevicePlugin {
    type Owner = ClusterPolicy;
    const NAME: &'static str = flavor::KUBEVIRT.component;
    const CONDITION: &'static str = SANDBOX_DEVICE_PLUGIN_READY;
    const SECTION: &'static str = flavor::KUBEVIRT.section;
    type Input = Input;
    /// Its own image; the barrier's validator image is read by every operand that waits on it.
    const IMAGES: &'static [ImageEnv] = &[ImageEnv {
        var: flavor::KUBEVIRT.image_env,
        chart_values: Some(flavor::KUBEVIRT.section),
    }];

    fn validate(spec: &ClusterPolicySpec, cluster: &Cluster<'_>) -> Result<Option<Input>, Error> {
        validate::validate(&flavor::KUBEVIRT, spec, cluster)
    }

    /// Without sandbox workloads (or in `kata` mode) the section is not read at all (NVIDIA's
    /// rule).
    fn disabled_because(spec: &ClusterPolicySpec, _cluster: &Cluster<'_>) -> Option<String> {
        disabled_because(spec, &flavor::KUBEVIRT)
    }

    fn render(input: &Input) -> Children {
        render::children(input)
    }
}

impl Operand for KataSandboxDevicePlugin {
    type Owner = ClusterPolicy;
    const NAME: &'static str = flavor::KATA.component;
    const CONDITION: &'static str = KATA_SANDBOX_DEVICE_PLUGIN_READY;
    const SECTION: &'static str = flavor::KATA.section;
    type Input = Input;
    /// Its own image; the barrier's validator image is read by every operand that waits on it.
    const IMAGES: &'static [ImageEnv] = &[ImageEnv {
        var: flavor::KATA.image_env,
        chart_values: Some(flavor::KATA.section),
    }];

    fn validate(spec: &ClusterPolicySpec, cluster: &Cluster<'_>) -> Result<Option<Input>, Error> {
        validate::validate(&flavor::KATA, spec, cluster)
    }

    /// Without sandbox workloads (or in `kubevirt` mode) the section is not read at all
    /// (NVIDIA's rule).
    fn disabled_because(spec: &ClusterPolicySpec, _cluster: &Cluster<'_>) -> Option<String> {
        disabled_because(spec, &flavor::KATA)
    }

    fn render(input: &Input) -> Children {
        render::children(input)
    }
}
