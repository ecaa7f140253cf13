//! The GPUCluster's DCGM (`nvidia-dcgm-dra`) rendered for NVIDIA's GPUCluster cases: off by
//! default, on with `dcgm.enabled: true`, with the pod labels and annotations of `daemonsets`.
#![allow(clippy::unwrap_used)]

use gpu_operator_api::{GpuCluster, GpuClusterSpec};
use gpu_operator_core::{
    contract::Operand,
    fixtures::{self, children_values, with_cluster},
};
use gpu_operator_dcgm_hostengine::DcgmDra;

fn rendered(spec: serde_json::Value) -> serde_json::Value {
    let spec: GpuClusterSpec = serde_json::from_value(spec).unwrap();
    let cr = GpuCluster::new("gpu-cluster", spec);
    match with_cluster(&fixtures::image_env, |cluster| {
        DcgmDra::validate(&cr, cluster)
    })
    .unwrap()
    {
        Some(input) => children_values(&DcgmDra::render(&input)).unwrap(),
        None => serde_json::json!("disabled"),
    }
}

#[test]
fn off_unless_enabled() {
    assert_eq!(rendered(serde_json::json!({})), "disabled");
    assert_eq!(rendered(serde_json::json!({"dcgm": {}})), "disabled");
    assert_eq!(
        rendered(serde_json::json!({"dcgm": {"enabled": false}})),
        "disabled"
    );
}

#[test]
fn enabled() {
    insta::assert_yaml_snapshot!(rendered(serde_json::json!({"dcgm": {"enabled": true}})));
}

#[test]
fn pod_metadata_and_settings() {
    insta::assert_yaml_snapshot!(rendered(serde_json::json!({
        "dcgm": {"enabled": true, "repository": "nvcr.io/nvidia/cloud-native", "image": "dcgm",
            "version": "4.2.3-1", "imagePullPolicy": "Always", "hostNetwork": true,
            "env": [{"name": "DCGM_X", "value": "1"}]},
        "daemonsets": {"labels": {"team": "gpu"}, "annotations": {"note": "x"},
            "priorityClassName": "high", "tolerations": [{"operator": "Exists"}]},
    })));
}
