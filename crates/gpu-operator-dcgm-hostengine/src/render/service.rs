//! Service `nvidia-dcgm` (`nvidia-dcgm-dra` for a GPUCluster): port 5555 with
//! `internalTrafficPolicy: Local`, so a client reaches the host engine of its own node.

use gpu_operator_core::build::meta;
use k8s_openapi::{
    api::core::v1::{Service, ServicePort, ServiceSpec},
    apimachinery::pkg::{apis::meta::v1::ObjectMeta, util::intstr::IntOrString},
};

use crate::{Form, PORT};

/// The Service.
pub fn build(form: &Form) -> Service {
    let name = form.name();
    Service {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(meta::labels(name, form.component())),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".to_owned()),
            internal_traffic_policy: Some("Local".to_owned()),
            selector: Some([(meta::APP_LABEL.to_owned(), name.to_owned())].into()),
            ports: Some(vec![ServicePort {
                name: Some("dcgm".to_owned()),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_is_node_local_on_5555_and_selects_the_daemonset() {
        let spec = build(&Form::GpuCluster).spec.unwrap();
        assert_eq!(spec.internal_traffic_policy.as_deref(), Some("Local"));
        let port = &spec.ports.unwrap()[0];
        assert_eq!((port.name.as_deref(), port.port), (Some("dcgm"), 5555));
        assert_eq!(spec.selector.unwrap()["app"], "nvidia-dcgm-dra");
    }
}
