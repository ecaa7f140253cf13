//! The operand registry: [`visit_all`] names every operand of the ClusterPolicy, once,
//! [`visit_nvidia_driver`] every operand of an NVIDIADriver and [`visit_gpu_cluster`] every
//! operand of the GPUCluster; [`visit_every_kind`] visits every list. What depends on the lists derives from them: the reconcilers `gpu-operator run` starts
//! (a [`VisitAny`] there), the
//! conditions the overall `Ready` waits for ([`ready_conditions`]), the image variables the
//! operator reads ([`image_envs`], [`image_vars`]), and the tests and fuzz targets that run every
//! operand. Tests here fail when a crate implements `Operand` but is not listed, and when the
//! chart's operator environment and the image variables disagree.

use std::sync::LazyLock;

use gpu_operator_api::ClusterPolicy;
use gpu_operator_core::contract::{ImageEnv, Operand};

/// What is done with each operand, in the registry's order.
pub trait Visit {
    /// Called once for every operand `O` of the ClusterPolicy.
    fn operand<O: Operand<Owner = ClusterPolicy>>(&mut self);
}

/// Calls `visit` with every operand of the ClusterPolicy, in the order its overall `Ready` names
/// them.
pub fn visit_all(visit: &mut impl Visit) {
    visit.operand::<gpu_operator_device_plugin::DevicePlugin>();
    visit.operand::<gpu_operator_validator_operand::Validation>();
    visit.operand::<gpu_operator_driver::Driver>();
    visit.operand::<gpu_operator_toolkit::Toolkit>();
    visit.operand::<gpu_operator_dcgm_hostengine::Dcgm>();
    visit.operand::<gpu_operator_dcgm_exporter::DcgmExporter>();
    visit.operand::<gpu_operator_mig_manager::MigManager>();
    visit.operand::<gpu_operator_node_status_exporter::NodeStatusExporter>();
    visit.operand::<gpu_operator_gfd::GpuFeatureDiscovery>();
    visit.operand::<gpu_operator_vgpu_manager::VgpuManager>();
    visit.operand::<gpu_operator_vgpu_device_manager::VgpuDeviceManager>();
    visit.operand::<gpu_operator_sandbox_validator::SandboxValidator>();
    visit.operand::<gpu_operator_vfio_manager::VfioManager>();
    visit.operand::<gpu_operator_sandbox_device_plugin::SandboxDevicePlugin>();
    visit.operand::<gpu_operator_sandbox_device_plugin::KataSandboxDevicePlugin>();
    visit.operand::<gpu_operator_cc_manager::CcManager>();
    visit.operand::<gpu_operator_sandbox::Sandbox>();
}

/// What is done with each operand of any owner kind, in the registry's order.
pub trait VisitAny {
    /// Called once for every operand `O`.
    fn operand<O: Operand>(&mut self);
}

/// Calls `visit` with every operand of an NVIDIADriver.
pub fn visit_nvidia_driver(visit: &mut impl VisitAny) {
    visit.operand::<gpu_operator_driver::NvidiaDriverOperand>();
}

/// Calls `visit` with every operand of the GPUCluster (the DRA stack): the DRA driver, the DRA
/// validator, DCGM and the DCGM exporter.
pub fn visit_gpu_cluster(visit: &mut impl VisitAny) {
    visit.operand::<gpu_operator_dra_driver::DraDriver>();
    visit.operand::<gpu_operator_dra_driver::DraValidator>();
    visit.operand::<gpu_operator_dcgm_hostengine::DcgmDra>();
    visit.operand::<gpu_operator_dcgm_exporter::DcgmExporterDra>();
}

/// Calls `visit` with every operand of every owner kind: the ClusterPolicy's ([`visit_all`]),
/// then the NVIDIADriver's ([`visit_nvidia_driver`]), then the GPUCluster's
/// ([`visit_gpu_cluster`]).
pub fn visit_every_kind(visit: &mut impl VisitAny) {
    struct ClusterPolicyOnes<'a, V>(&'a mut V);
    impl<V: VisitAny> Visit for ClusterPolicyOnes<'_, V> {
        fn operand<O: Operand<Owner = ClusterPolicy>>(&mut self) {
            self.0.operand::<O>();
        }
    }
    visit_all(&mut ClusterPolicyOnes(visit));
    visit_nvidia_driver(visit);
    visit_gpu_cluster(visit);
}

/// One operand's names, as the registry lists them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// [`Operand::NAME`].
    pub name: &'static str,
    /// [`Operand::CONDITION`].
    pub condition: &'static str,
    /// [`Operand::IN_OVERALL_READY`].
    pub in_overall_ready: bool,
    /// [`Operand::IMAGES`].
    pub images: &'static [ImageEnv],
    /// The operand's Rust type, such as `gpu_operator_driver::Driver`.
    pub type_name: &'static str,
    /// The kind of its owner ([`Operand::Owner`]), such as `ClusterPolicy`.
    pub owner: &'static str,
}

/// The [`Entry`] of operand `O`.
fn entry<O: Operand>() -> Entry {
    Entry {
        name: O::NAME,
        condition: O::CONDITION,
        in_overall_ready: O::IN_OVERALL_READY,
        images: O::IMAGES,
        type_name: std::any::type_name::<O>(),
        owner: std::any::type_name::<O::Owner>()
            .rsplit("::")
            .next()
            .unwrap_or_default(),
    }
}

/// Every operand's [`Entry`] of every owner kind, in the registry's order.
pub fn all_entries() -> Vec<Entry> {
    struct Entries(Vec<Entry>);
    impl VisitAny for Entries {
        fn operand<O: Operand>(&mut self) {
            self.0.push(entry::<O>());
        }
    }
    let mut entries = Entries(Vec::new());
    visit_every_kind(&mut entries);
    entries.0
}

/// Every ClusterPolicy operand's [`Entry`], in the registry's order.
pub fn entries() -> Vec<Entry> {
    struct Entries(Vec<Entry>);
    impl Visit for Entries {
        fn operand<O: Operand<Owner = ClusterPolicy>>(&mut self) {
            self.0.push(entry::<O>());
        }
    }
    let mut entries = Entries(Vec::new());
    visit_all(&mut entries);
    entries.0
}

/// The operand conditions the overall `Ready` waits for, in the registry's order (the order the
/// overall status names them in).
pub fn ready_conditions() -> &'static [&'static str] {
    static CONDITIONS: LazyLock<Vec<&'static str>> = LazyLock::new(|| {
        entries()
            .into_iter()
            .filter(|entry| entry.in_overall_ready)
            .map(|entry| entry.condition)
            .collect()
    });
    &CONDITIONS
}

/// The conditions of the GPUCluster's operands its overall `Ready` waits for, in the registry's
/// order.
pub fn gpu_cluster_ready_conditions() -> Vec<&'static str> {
    struct Conditions(Vec<&'static str>);
    impl VisitAny for Conditions {
        fn operand<O: Operand>(&mut self) {
            if O::IN_OVERALL_READY {
                self.0.push(O::CONDITION);
            }
        }
    }
    let mut conditions = Conditions(Vec::new());
    visit_gpu_cluster(&mut conditions);
    conditions.0
}

/// Every image variable of every operand of every owner kind, each once, in the registry's order.
pub fn image_envs() -> Vec<ImageEnv> {
    let mut envs: Vec<ImageEnv> = Vec::new();
    for image in all_entries().iter().flat_map(|entry| entry.images) {
        if !envs.iter().any(|known| known.var == image.var) {
            envs.push(*image);
        }
    }
    envs
}

/// The names of [`image_envs`], which the operator reads from its environment at start-up.
pub fn image_vars() -> Vec<&'static str> {
    image_envs().iter().map(|image| image.var).collect()
}

#[cfg(test)]
mod tests;
