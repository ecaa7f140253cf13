//! The GPUCluster's DCGM ([`DcgmDra`]): NVIDIA's `nvidia-dcgm-dra`, the same host engine and
//! Service as the ClusterPolicy's from the same [`Input`], on nodes gated
//! `nvidia.com/gpu.deploy.dcgm-dra=true`, its pods holding an admin-access claim of every GPU of
//! their node instead of waiting for the toolkit and using the NVIDIA runtime. Deployed only with
//! `dcgm.enabled: true` (NVIDIA's GPUCluster default is off: the exporter then runs its embedded
//! engine). `spec.dcgm` is the ClusterPolicy's section type; `spec.daemonsets` applies as the
//! ClusterPolicy's.

use gpu_operator_api::{ClusterPolicySpec, GpuCluster, GpuClusterSpec};
use gpu_operator_core::{
    Error,
    contract::{Children, Cluster, ImageEnv, Operand},
};

use crate::{Dcgm, Form, Input};

/// The DCGM operand of the GPUCluster.
pub struct DcgmDra;

impl Operand for DcgmDra {
    type Owner = GpuCluster;
    const NAME: &'static str = "dcgm-dra";
    /// The GPUCluster's condition, named as the ClusterPolicy's.
    const CONDITION: &'static str = Dcgm::CONDITION;
    const SECTION: &'static str = "dcgm";
    type Input = Input;
    /// The ClusterPolicy's DCGM image variable: the GPUCluster's section falls back on it alike.
    const IMAGES: &'static [ImageEnv] = <Dcgm as Operand>::IMAGES;

    fn validate(cr: &GpuCluster, cluster: &Cluster<'_>) -> Result<Option<Input>, Error> {
        validate(&cr.spec, cluster)
    }

    fn disabled_because(_cr: &GpuCluster, _cluster: &Cluster<'_>) -> Option<String> {
        Some(
            "dcgm.enabled is not true (the GPUCluster's default): the DCGM exporter runs its \
             embedded host engine"
                .to_owned(),
        )
    }

    fn render(input: &Input) -> Children {
        crate::render::children(input)
    }
}

/// `Ok(None)` unless `dcgm.enabled` is true.
pub fn validate(spec: &GpuClusterSpec, cluster: &Cluster<'_>) -> Result<Option<Input>, Error> {
    if !spec.dcgm_enabled() {
        return Ok(None);
    }
    let policy = as_cluster_policy(spec);
    let image = cluster.image("dcgm", &policy.dcgm.image, "DCGM_IMAGE")?;
    Ok(Some(Input::new(
        &policy,
        image,
        Form::GpuCluster,
        cluster.namespace,
    )))
}

/// The ClusterPolicy spec whose DCGM renders as the GPUCluster's: its `dcgm` and `daemonsets`
/// sections.
fn as_cluster_policy(spec: &GpuClusterSpec) -> ClusterPolicySpec {
    ClusterPolicySpec {
        dcgm: spec.dcgm.clone().unwrap_or_default(),
        daemonsets: spec.daemonsets.clone(),
        ..ClusterPolicySpec::default()
    }
}

#[cfg(test)]
mod tests {
    use gpu_operator_api::spec::DcgmSpec;
    use gpu_operator_core::fixtures::with_cluster;

    use super::*;

    fn input(spec: &GpuClusterSpec) -> Option<Input> {
        with_cluster(&|name: &str| Some(format!("x/{name}:1")), |cluster| {
            validate(spec, cluster)
        })
        .unwrap()
    }

    #[test]
    fn off_unless_enabled_is_true() {
        let mut spec = GpuClusterSpec::default();
        assert!(input(&spec).is_none());
        spec.dcgm = Some(DcgmSpec::default());
        assert!(input(&spec).is_none(), "unset is off on a GPUCluster");
        spec.dcgm = Some(DcgmSpec {
            enabled: Some(true),
            ..DcgmSpec::default()
        });
        let input = input(&spec).unwrap();
        assert_eq!(input.image, "x/DCGM_IMAGE:1");
        assert_eq!(input.form, Form::GpuCluster);
    }
}
