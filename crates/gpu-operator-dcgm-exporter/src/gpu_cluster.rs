//! The GPUCluster's DCGM exporter ([`DcgmExporterDra`]): NVIDIA's `nvidia-dcgm-exporter-dra`, the
//! same DaemonSet, Service, optional ServiceMonitor and RBAC as the ClusterPolicy's from the same
//! [`Input`], on nodes gated `nvidia.com/gpu.deploy.dcgm-exporter-dra=true`, its pods holding an
//! admin-access claim of every GPU of their node instead of waiting for the toolkit and using the
//! NVIDIA runtime (see [`Form::GpuCluster`]). Deployed unless `dcgmExporter.enabled: false`; it
//! reaches the GPUCluster's host engine `nvidia-dcgm-dra:5555` only with `dcgm.enabled: true`
//! (else its embedded one). `spec.dcgmExporter` is the ClusterPolicy's section type, every setting
//! applied as the ClusterPolicy's but the shipped alerts and dashboards (`prometheusRule`,
//! `grafanaDashboards`), whose object names the ClusterPolicy's exporter owns: not deployed.
//! `spec.daemonsets` applies as the ClusterPolicy's, `hostPaths.kubeletRootDir` moves the
//! pod-resources socket.

use gpu_operator_api::{ClusterPolicySpec, GpuCluster, GpuClusterSpec, spec::HostPathsSpec};
use gpu_operator_core::{
    Error,
    contract::{Children, Cluster, ImageEnv, Operand},
};

use crate::{DcgmExporter, Form, Input};

/// The DCGM exporter operand of the GPUCluster.
pub struct DcgmExporterDra;

impl Operand for DcgmExporterDra {
    type Owner = GpuCluster;
    const NAME: &'static str = "dcgm-exporter-dra";
    /// The GPUCluster's condition, named as the ClusterPolicy's.
    const CONDITION: &'static str = DcgmExporter::CONDITION;
    const SECTION: &'static str = "dcgmExporter";
    const SERVICE_MONITORS: bool = true;
    type Input = Input;
    /// The ClusterPolicy's exporter image variable: the GPUCluster's section falls back on it.
    const IMAGES: &'static [ImageEnv] = <DcgmExporter as Operand>::IMAGES;

    fn validate(cr: &GpuCluster, cluster: &Cluster<'_>) -> Result<Option<Input>, Error> {
        validate(&cr.spec, cluster)
    }

    fn render(input: &Input) -> Children {
        crate::render::children(input)
    }
}

/// `Ok(None)` when `dcgmExporter.enabled` is false (it defaults to true).
pub fn validate(spec: &GpuClusterSpec, cluster: &Cluster<'_>) -> Result<Option<Input>, Error> {
    if !spec.dcgm_exporter_enabled() {
        return Ok(None);
    }
    let policy = as_cluster_policy(spec);
    let image = cluster.image(
        "dcgmExporter",
        &policy.dcgm_exporter.image,
        "DCGM_EXPORTER_IMAGE",
    )?;
    Ok(Some(Input::new(
        &policy,
        image,
        Form::GpuCluster,
        cluster.namespace.to_owned(),
    )))
}

/// The ClusterPolicy spec whose exporter renders as the GPUCluster's: its `dcgmExporter` (less
/// the alerts and dashboards), `daemonsets` and `hostPaths.kubeletRootDir`, and whether its host
/// engine runs (`dcgm.enabled`, off unless true on a GPUCluster).
fn as_cluster_policy(spec: &GpuClusterSpec) -> ClusterPolicySpec {
    let mut policy = ClusterPolicySpec {
        dcgm_exporter: spec.dcgm_exporter.clone().unwrap_or_default(),
        daemonsets: spec.daemonsets.clone(),
        host_paths: spec
            .host_paths
            .kubelet_root_dir
            .clone()
            .map(|dir| HostPathsSpec {
                kubelet_root_dir: Some(dir),
                ..HostPathsSpec::default()
            }),
        ..ClusterPolicySpec::default()
    };
    policy.dcgm.enabled = Some(spec.dcgm_enabled());
    policy.dcgm_exporter.prometheus_rule = None;
    policy.dcgm_exporter.grafana_dashboards = None;
    policy
}

#[cfg(test)]
mod tests {
    use gpu_operator_api::spec::DcgmExporterSpec;
    use gpu_operator_core::fixtures::with_cluster;

    use super::*;

    fn input(spec: &GpuClusterSpec) -> Option<Input> {
        with_cluster(&|name: &str| Some(format!("x/{name}:1")), |cluster| {
            validate(spec, cluster)
        })
        .unwrap()
    }

    #[test]
    fn on_unless_disabled_reading_pods_and_the_remote_engine_only_with_dcgm() {
        let mut spec = GpuClusterSpec::default();
        let plain = input(&spec).unwrap();
        assert_eq!(plain.form, Form::GpuCluster);
        assert!(plain.reads_pods() && !plain.remote_engine);
        spec.dcgm = serde_json::from_value(serde_json::json!({"enabled": true})).unwrap();
        assert!(input(&spec).unwrap().remote_engine);
        spec.dcgm_exporter = Some(DcgmExporterSpec {
            enabled: Some(false),
            ..DcgmExporterSpec::default()
        });
        assert!(input(&spec).is_none());
    }

    #[test]
    fn the_shipped_alerts_and_dashboards_stay_with_the_cluster_policy() {
        let spec: GpuClusterSpec = serde_json::from_value(serde_json::json!({
            "dcgmExporter": {"prometheusRule": {"enabled": true},
                "grafanaDashboards": {"enabled": true}}
        }))
        .unwrap();
        assert!(!input(&spec).unwrap().observability_enabled());
    }
}
