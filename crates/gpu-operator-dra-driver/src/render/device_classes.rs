//! The DRA driver's DeviceClasses (`resource.k8s.io/v1`), the names workloads claim devices by:
//! `gpu.nvidia.com` (whole GPUs), `mig.nvidia.com` (MIG devices) and `vfio.gpu.nvidia.com` (GPUs
//! bound to vfio-pci, with `PassthroughSupport`) always, as NVIDIA creates them whatever the
//! gates say; `compute-domain-daemon.nvidia.com` and `compute-domain-default-channel.nvidia.com`
//! (IMEX channel 0) with `computeDomains`. Each selects the driver's devices by its CEL selector.

use k8s_openapi::{
    api::resource::v1::{CELDeviceSelector, DeviceClass, DeviceClassSpec, DeviceSelector},
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};

use super::rbac::labels;
use crate::Input;

/// The DRA driver name of the GPU devices.
pub const GPU_DRIVER: &str = "gpu.nvidia.com";
/// The DRA driver name of the ComputeDomain devices.
pub const COMPUTE_DOMAIN_DRIVER: &str = "compute-domain.nvidia.com";

/// The DeviceClasses of `input`.
pub fn build(input: &Input) -> Vec<DeviceClass> {
    let of_type = |driver: &str, kind: &str| {
        format!("device.driver == '{driver}' && device.attributes['{driver}'].type == '{kind}'")
    };
    let mut classes = vec![
        class("gpu.nvidia.com", of_type(GPU_DRIVER, "gpu")),
        class("mig.nvidia.com", of_type(GPU_DRIVER, "mig")),
        class("vfio.gpu.nvidia.com", of_type(GPU_DRIVER, "vfio")),
    ];
    if input.compute_domains.is_some() {
        classes.push(class(
            "compute-domain-daemon.nvidia.com",
            of_type(COMPUTE_DOMAIN_DRIVER, "daemon"),
        ));
        classes.push(class(
            "compute-domain-default-channel.nvidia.com",
            format!(
                "{} && device.attributes['{COMPUTE_DOMAIN_DRIVER}'].id == 0",
                of_type(COMPUTE_DOMAIN_DRIVER, "channel")
            ),
        ));
    }
    classes
}

fn class(name: &str, expression: String) -> DeviceClass {
    DeviceClass {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(labels(name)),
            ..ObjectMeta::default()
        },
        spec: DeviceClassSpec {
            selectors: Some(vec![DeviceSelector {
                cel: Some(CELDeviceSelector { expression }),
            }]),
            ..DeviceClassSpec::default()
        },
    }
}

#[cfg(test)]
mod tests {
    use gpu_operator_core::dra_api;
    use serde_json::json;

    use super::*;
    use crate::testing::input;

    #[test]
    fn every_class_round_trips_through_v1beta2_unchanged() {
        let classes = build(&input(
            json!({"draDriver": {"computeDomains": {"enabled": true}}}),
        ));
        assert_eq!(classes.len(), 5);
        for class in &classes {
            let served = dra_api::to_served(class).unwrap();
            let mut served_json = serde_json::to_value(&served).unwrap();
            assert_eq!(served_json["apiVersion"], json!("resource.k8s.io/v1beta2"));
            served_json["apiVersion"] = json!("resource.k8s.io/v1");
            assert_eq!(served_json, serde_json::to_value(class).unwrap());
            let back: DeviceClass = dra_api::from_served(&served).unwrap();
            assert_eq!(&back, class);
        }
    }
}
