//! Round trips of realistic DRA objects through `v1beta2`, and the choice of the version.

use k8s_openapi::api::resource::v1::{
    DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use serde_json::{Value, json};

use super::*;
use crate::{build::admin_claim, cache::resource_slice::SliceSummary};

/// `object` sent at `v1beta2` and read back: equal to `object`, and the same JSON at `v1beta2`
/// but for `apiVersion`.
fn round_trips<K: DraKind + PartialEq>(object: &K) {
    let served = to_served(object).unwrap();
    let mut served_json = serde_json::to_value(&served).unwrap();
    assert_eq!(
        served_json["apiVersion"],
        json!("resource.k8s.io/v1beta2"),
        "{served_json}"
    );
    served_json["apiVersion"] = json!("resource.k8s.io/v1");
    assert_eq!(served_json, serde_json::to_value(object).unwrap());
    let back: K = from_served(&served).unwrap();
    assert_eq!(&back, object);
}

fn device(name: &str, attributes: &Value) -> Value {
    json!({"name": name, "attributes": attributes,
           "capacity": {"memory": {"value": "81559Mi"}}})
}

/// A node's slice as NVIDIA's DRA driver publishes it: two GPUs and a MIG device.
fn gpu_slice() -> Value {
    json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "node-1-gpu.nvidia.com-abcde", "resourceVersion": "42",
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "node-1",
                                          "uid": "u1", "controller": true}]},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": "node-1",
            "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
            "devices": [
                device("gpu-0", &json!({"type": {"string": "gpu"}, "uuid": {"string": "GPU-n1-0"},
                                        "productName": {"string": "NVIDIA H100 80GB HBM3"},
                                        "cudaComputeCapability": {"version": "9.0.0"},
                                        "driverVersion": {"version": "580.65.6"},
                                        "index": {"int": 0}})),
                device("gpu-1", &json!({"type": {"string": "gpu"}, "uuid": {"string": "GPU-n1-1"},
                                        "index": {"int": 1}})),
                device("gpu-1-mig-9-0-1", &json!({"type": {"string": "mig"},
                                                  "parentUUID": {"string": "GPU-n1-1"},
                                                  "profile": {"string": "1g.10gb"}})),
            ]
        }
    })
}

#[test]
fn the_admin_access_claim_template_round_trips() {
    let template = admin_claim::template("nvidia-dcgm-admin-gpus", "nvidia-dcgm", "dcgm");
    round_trips(&template);
    let served = serde_json::to_value(to_served(&template).unwrap()).unwrap();
    assert_eq!(
        served["spec"]["spec"]["devices"]["requests"][0]["exactly"]["adminAccess"],
        json!(true)
    );
}

#[test]
fn a_device_class_round_trips() {
    let class: DeviceClass = serde_json::from_value(json!({
        "metadata": {"name": "mig.nvidia.com",
                     "labels": {"app.kubernetes.io/managed-by": "gpu-operator"}},
        "spec": {"selectors": [{"cel": {"expression":
            "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"}}]}
    }))
    .unwrap();
    round_trips(&class);
}

#[test]
fn a_gpu_slice_round_trips_and_reads_as_its_summary() {
    let slice: ResourceSlice = serde_json::from_value(gpu_slice()).unwrap();
    round_trips(&slice);
    let served = to_served(&slice).unwrap();
    let summary: SliceSummary = from_served(&served).unwrap();
    let direct: SliceSummary = serde_json::from_value(gpu_slice()).unwrap();
    assert_eq!(summary, direct);
    assert_eq!((summary.devices.gpu, summary.devices.mig), (2, 1));
    assert_eq!(summary.physical_gpus, ["GPU-n1-0", "GPU-n1-1"]);
}

#[test]
fn an_allocated_claim_round_trips() {
    let claim: ResourceClaim = serde_json::from_value(json!({
        "metadata": {"name": "job-gpu-x7", "namespace": "team-a"},
        "spec": {"devices": {"requests": [{"name": "gpu",
            "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount",
                        "count": 1}}]}},
        "status": {
            "allocation": {"devices": {"results": [{"request": "gpu", "driver": "gpu.nvidia.com",
                                                     "pool": "node-1", "device": "gpu-0"}]}},
            "reservedFor": [{"resource": "pods", "name": "job-0", "uid": "p1"}]
        }
    }))
    .unwrap();
    round_trips(&claim);
}

#[test]
fn a_beta_object_with_an_unknown_shape_is_an_error() {
    let odd = json!({"metadata": {"name": "x"}, "spec": "not an object"});
    let error = from_served::<DeviceClass, _>(&odd).unwrap_err();
    assert_eq!(error.category(), "RenderFailed");
    let template = json!({"metadata": {"name": "x"}, "spec": {"spec": {"devices": 3}}});
    assert!(from_served::<ResourceClaimTemplate, _>(&template).is_err());
}

#[test]
fn v1_is_preferred_then_v1beta2_and_nothing_else_is_usable() {
    let among = |versions: &[&str]| {
        DraApi::among(&versions.iter().map(|v| (*v).to_owned()).collect::<Vec<_>>())
    };
    assert_eq!(among(&["v1", "v1beta2", "v1beta1"]), Some(DraApi::V1));
    assert_eq!(among(&["v1beta2", "v1"]), Some(DraApi::V1));
    assert_eq!(among(&["v1beta2", "v1beta1"]), Some(DraApi::V1beta2));
    assert_eq!(among(&["v1beta1"]), None);
    assert_eq!(among(&[]), None);
    assert_eq!(DraApi::V1beta2.version(), "v1beta2");
    assert_eq!(DraApi::default(), DraApi::V1);
}
