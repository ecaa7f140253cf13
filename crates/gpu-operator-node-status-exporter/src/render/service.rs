//! Service `nvidia-node-status-exporter`: port `node-status` 8000, marked for Prometheus scraping.

use gpu_operator_core::{build::meta, contract::Operand as _};
use k8s_openapi::{
    api::core::v1::{Service, ServicePort, ServiceSpec},
    apimachinery::pkg::{apis::meta::v1::ObjectMeta, util::intstr::IntOrString},
};

use crate::{NAME, NodeStatusExporter, PORT};

/// The Service.
pub fn build() -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some(NAME.to_owned()),
            labels: Some(meta::labels(NAME, NodeStatusExporter::NAME)),
            annotations: Some([("prometheus.io/scrape".to_owned(), "true".to_owned())].into()),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            selector: Some([(meta::APP_LABEL.to_owned(), NAME.to_owned())].into()),
            ports: Some(vec![ServicePort {
                name: Some(PORT.0.to_owned()),
                port: PORT.1,
                target_port: Some(IntOrString::Int(PORT.1)),
                protocol: Some("TCP".to_owned()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}
