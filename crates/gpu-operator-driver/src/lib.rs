//! The driver operand: `nvidia-driver-daemonset` (one DaemonSet per OS when the GPU nodes run
//! several, one per kernel with precompiled drivers), its ServiceAccount and RBAC, and the
//! `nvidia-driver-startup-probe` ConfigMap, on nodes labelled `nvidia.com/gpu.deploy.driver=true`.
//! Always `OnDelete`: a driver pod is replaced only when it is deleted (by the upgrade controller
//! or by hand). Pure validate and render steps; the shared pipeline does the rest. The same
//! DaemonSets serve an NVIDIADriver's nodes ([`NvidiaDriverOperand`], in `nvidia_driver`).

mod digest;
pub mod in_sync;
mod nvidia_driver;
mod pools;
mod render;
mod settings;
mod validate;

use gpu_operator_api::{ClusterPolicy, ClusterPolicySpec, conditions::operand::DRIVER_READY};
use gpu_operator_core::{
    Error,
    cache::stores::Stores,
    contract::{Children, Cluster, ImageEnv, Operand, Warning},
};
use k8s_openapi::api::{apps::v1::DaemonSet, core::v1::Pod};

pub use nvidia_driver::{NvidiaDriverOperand, PerDriver, owners};
pub use pools::{Pool, os_tag, sanitized_kernel};
pub use validate::Input;

/// Name of the DaemonSet (or the prefix of the per-OS and per-kernel ones) and its `app` label,
/// as NVIDIA names them.
pub const DAEMONSET: &str = "nvidia-driver-daemonset";
/// Name of the ServiceAccount, Role, ClusterRole and bindings, as NVIDIA names them.
pub const SERVICE_ACCOUNT: &str = "nvidia-driver";
/// Name of the ConfigMap with the driver container's startup probe script.
pub const STARTUP_PROBE_CONFIG_MAP: &str = "nvidia-driver-startup-probe";

/// The driver operand.
pub struct Driver;

impl Operand for Driver {
    type Owner = ClusterPolicy;
    /// NVIDIA's `app.kubernetes.io/component` of the driver objects, which the driver pods'
    /// anti-affinity and NVIDIA's upgrade tooling select on.
    const NAME: &'static str = "nvidia-driver";
    const CONDITION: &'static str = DRIVER_READY;
    const SECTION: &'static str = "driver";
    type Input = Input;
    const IMAGES: &'static [ImageEnv] = &[
        ImageEnv {
            var: "DRIVER_IMAGE",
            chart_values: Some("driver"),
        },
        ImageEnv {
            var: "DRIVER_MANAGER_IMAGE",
            chart_values: Some("driver.manager"),
        },
        ImageEnv {
            var: "GDS_IMAGE",
            chart_values: Some("gds"),
        },
        ImageEnv {
            var: "GDRCOPY_IMAGE",
            chart_values: Some("gdrcopy"),
        },
    ];

    fn validate(spec: &ClusterPolicySpec, cluster: &Cluster<'_>) -> Result<Option<Input>, Error> {
        validate::validate(spec, cluster)
    }

    /// With `driver.useNvidiaDriverCRD: true`, NVIDIADriver objects deploy the drivers.
    fn disabled_because(spec: &ClusterPolicySpec, _cluster: &Cluster<'_>) -> Option<String> {
        (spec.driver_enabled() && validate::managed_by_nvidia_drivers(spec)).then(|| {
            "driver.useNvidiaDriverCRD is true: the drivers are managed by NVIDIADriver objects"
                .to_owned()
        })
    }

    /// With `driver.useNvidiaDriverCRD: true` the NVIDIADrivers' DaemonSets take the drivers
    /// over: the ClusterPolicy's driver pods keep running, their node's new driver pod waiting
    /// for them (one driver pod per node), until the upgrade replaces them.
    fn hands_over(spec: &ClusterPolicySpec, _cluster: &Cluster<'_>) -> bool {
        spec.driver_enabled() && validate::managed_by_nvidia_drivers(spec)
    }

    /// With `driver.useNvidiaDriverCRD: true`: the GPU nodes no NVIDIADriver serves.
    fn placement_warnings(
        spec: &ClusterPolicySpec,
        _cluster: &Cluster<'_>,
        stores: &Stores,
    ) -> Vec<Warning> {
        if !nvidia_driver::handed_over(Some(spec)) {
            return Vec::new();
        }
        owners::unserved_warning(&owners::of_caches(stores))
            .into_iter()
            .collect()
    }

    fn render(input: &Input) -> Children {
        render::children(input)
    }

    /// With `driver.useNvidiaDriverCRD: true`, the identity, RBAC and startup probe ConfigMap the
    /// NVIDIADrivers' DaemonSets share (the operator may write ClusterRoles under fixed names
    /// only, and one object has one controller).
    fn render_disabled(spec: &ClusterPolicySpec, cluster: &Cluster<'_>) -> Children {
        if spec.driver_enabled() && validate::managed_by_nvidia_drivers(spec) {
            render::shared(cluster.namespace)
        } else {
            Children::default()
        }
    }

    fn unserved(input: &Input) -> Option<String> {
        input.unserved.clone()
    }

    /// A driver pod of an older template that installs the same driver needs no replacement.
    const POD_IN_SYNC: Option<fn(&DaemonSet, &Pod) -> bool> = Some(in_sync::pod_in_sync);
}
