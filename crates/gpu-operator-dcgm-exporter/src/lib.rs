//! The DCGM exporter operand: DaemonSet `nvidia-dcgm-exporter` on nodes labelled
//! `nvidia.com/gpu.deploy.dcgm-exporter=true`, its Service (port 9400, `gpu-metrics`), a
//! Prometheus Operator ServiceMonitor when asked for (and, when its CRD is missing, a warning
//! instead of NVIDIA's silence), its ServiceAccount and RBAC (reading pods only with pod-label
//! enrichment), and when asked for, the shipped observability: a PrometheusRule of GPU, cost,
//! workload and stack alerts and Grafana dashboard ConfigMaps ([`observability`]). Pure validate
//! and render steps; the shared pipeline does the rest. The same for a GPUCluster
//! ([`DcgmExporterDra`], in `gpu_cluster`): `nvidia-dcgm-exporter-dra`, the GPUs through an
//! admin-access DRA claim.

mod form;
mod gpu_cluster;
pub mod observability;
mod render;
mod validate;

use gpu_operator_api::{
    ClusterPolicy, ClusterPolicySpec, conditions::operand::DCGM_EXPORTER_READY,
};
use gpu_operator_core::{
    Error,
    contract::{Children, Cluster, ImageEnv, Operand},
};

pub use form::{ADMIN_CLAIM_TEMPLATE, ENABLE_DRA_ENV, Form};
pub use gpu_cluster::DcgmExporterDra;
pub use render::prometheus_rule::RULE_NAME;
pub use validate::Input;

/// Name of the DaemonSet, Service, ServiceMonitor, ServiceAccount, Role and their `app` label.
pub const NAME: &str = "nvidia-dcgm-exporter";
/// The ClusterRole (and binding) that lets the exporter read pods for label enrichment.
pub const READ_PODS: &str = "nvidia-dcgm-exporter-read-pods";
/// The GPUCluster's exporter's names, as NVIDIA's.
pub const DRA_NAME: &str = "nvidia-dcgm-exporter-dra";
/// The GPUCluster's exporter's ClusterRole (and binding), which also reads ResourceSlices.
pub const DRA_READ_PODS: &str = "nvidia-dcgm-exporter-dra-read-pods";
/// The metrics port.
pub const PORT: i32 = 9400;

/// The DCGM exporter operand.
pub struct DcgmExporter;

impl Operand for DcgmExporter {
    type Owner = ClusterPolicy;
    const NAME: &'static str = "dcgm-exporter";
    const CONDITION: &'static str = DCGM_EXPORTER_READY;
    const SECTION: &'static str = "dcgmExporter";
    const SERVICE_MONITORS: bool = true;
    type Input = Input;
    const IMAGES: &'static [ImageEnv] = &[ImageEnv {
        var: "DCGM_EXPORTER_IMAGE",
        chart_values: Some("dcgmExporter"),
    }];

    fn validate(spec: &ClusterPolicySpec, cluster: &Cluster<'_>) -> Result<Option<Input>, Error> {
        validate::validate(spec, cluster)
    }

    fn render(input: &Input) -> Children {
        render::children(input)
    }
}
