//! The admin-access claim through which a GPUCluster's monitoring pods (DCGM, the DCGM exporter)
//! reach every GPU of their node under DRA, as NVIDIA's: a ResourceClaimTemplate whose one
//! request, `admin-gpus`, asks for all devices of DeviceClass `gpu.nvidia.com` with
//! `adminAccess: true` (so the claim is allocated next to the workloads' claims on the same GPUs),
//! held by the pod (`resourceClaims`) and its main container (`resources.claims`). The scheduler
//! allows `adminAccess` only in a namespace labelled `resource.kubernetes.io/admin-access=true`.

use k8s_openapi::{
    api::{
        core::v1::{PodResourceClaim, PodSpec, ResourceClaim, ResourceRequirements},
        resource::v1::{
            DeviceClaim, DeviceRequest, ExactDeviceRequest, ResourceClaimSpec,
            ResourceClaimTemplate, ResourceClaimTemplateSpec,
        },
    },
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};

use crate::build::meta;

/// Name of the request, of the pod's claim and of the container's claim reference.
pub const REQUEST: &str = "admin-gpus";
/// The DRA driver's DeviceClass of whole GPUs.
pub const GPU_DEVICE_CLASS: &str = "gpu.nvidia.com";

/// ResourceClaimTemplate `name` of the admin-access request, labelled for the pods of `app`
/// owned by reconciler `component`.
pub fn template(name: &str, app: &str, component: &str) -> ResourceClaimTemplate {
    ResourceClaimTemplate {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(meta::labels(app, component)),
            ..ObjectMeta::default()
        },
        spec: ResourceClaimTemplateSpec {
            metadata: None,
            spec: ResourceClaimSpec {
                devices: Some(DeviceClaim {
                    requests: Some(vec![DeviceRequest {
                        name: REQUEST.to_owned(),
                        exactly: Some(ExactDeviceRequest {
                            admin_access: Some(true),
                            allocation_mode: Some("All".to_owned()),
                            device_class_name: GPU_DEVICE_CLASS.to_owned(),
                            ..ExactDeviceRequest::default()
                        }),
                        first_available: None,
                    }]),
                    ..DeviceClaim::default()
                }),
            },
        },
    }
}

/// Makes `pod` claim from template `template` and its container `container` hold the claim.
/// Runs after the component's settings, which replace the container's `resources`.
pub fn hold(pod: &mut PodSpec, container: &str, template: &str) {
    pod.resource_claims = Some(vec![PodResourceClaim {
        name: REQUEST.to_owned(),
        resource_claim_template_name: Some(template.to_owned()),
        resource_claim_name: None,
    }]);
    if let Some(main) = pod.containers.iter_mut().find(|c| c.name == container) {
        main.resources
            .get_or_insert_with(ResourceRequirements::default)
            .claims = Some(vec![ResourceClaim {
            name: REQUEST.to_owned(),
            request: None,
        }]);
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Container;

    use super::*;

    #[test]
    fn the_template_asks_for_every_gpu_with_admin_access() {
        let template = serde_json::to_value(template("t", "app", "c")).unwrap();
        assert_eq!(
            template["spec"]["spec"]["devices"]["requests"],
            serde_json::json!([{"name": "admin-gpus", "exactly": {
                "adminAccess": true, "allocationMode": "All", "deviceClassName": "gpu.nvidia.com"}}])
        );
        assert_eq!(template["metadata"]["labels"]["app"], "app");
    }

    #[test]
    fn the_pod_and_its_main_container_hold_the_claim_next_to_the_users_resources() {
        let limits = [(
            "cpu".to_owned(),
            k8s_openapi::apimachinery::pkg::api::resource::Quantity::default(),
        )]
        .into();
        let mut pod = PodSpec {
            containers: vec![
                Container {
                    name: "main".to_owned(),
                    resources: Some(ResourceRequirements {
                        limits: Some(limits),
                        ..ResourceRequirements::default()
                    }),
                    ..Container::default()
                },
                Container {
                    name: "side".to_owned(),
                    ..Container::default()
                },
            ],
            ..PodSpec::default()
        };
        hold(&mut pod, "main", "t");
        let claim = &pod.resource_claims.as_ref().unwrap()[0];
        assert_eq!(
            (
                claim.name.as_str(),
                claim.resource_claim_template_name.as_deref()
            ),
            ("admin-gpus", Some("t"))
        );
        let resources = pod.containers[0].resources.as_ref().unwrap();
        assert!(resources.limits.is_some());
        assert_eq!(resources.claims.as_ref().unwrap()[0].name, "admin-gpus");
        assert_eq!(pod.containers[1].resources, None);
    }
}
