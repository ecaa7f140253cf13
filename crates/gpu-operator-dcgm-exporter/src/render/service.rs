//! Service `nvidia-dcgm-exporter` (`nvidia-dcgm-exporter-dra` for a GPUCluster): port
//! `gpu-metrics` 9400, marked for Prometheus scraping; its type and internal traffic policy come
//! from `dcgmExporter.service`.

use gpu_operator_core::build::meta;
use k8s_openapi::{
    api::core::v1::{Service, ServicePort, ServiceSpec},
    apimachinery::pkg::{apis::meta::v1::ObjectMeta, util::intstr::IntOrString},
};

use crate::{Input, PORT};

/// Name of the metrics port, which dashboards and ServiceMonitors refer to.
pub const PORT_NAME: &str = "gpu-metrics";

/// The Service.
pub fn build(input: &Input) -> Service {
    let config = input.service.clone();
    let name = input.form.name();
    Service {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(meta::labels(name, input.form.component())),
            annotations: Some([("prometheus.io/scrape".to_owned(), "true".to_owned())].into()),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            type_: config.type_.filter(|t| !t.is_empty()),
            internal_traffic_policy: config.internal_traffic_policy.filter(|p| !p.is_empty()),
            selector: Some([(meta::APP_LABEL.to_owned(), name.to_owned())].into()),
            ports: Some(vec![ServicePort {
                name: Some(PORT_NAME.to_owned()),
                port: PORT,
                target_port: Some(IntOrString::Int(PORT)),
                protocol: Some("TCP".to_owned()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}
