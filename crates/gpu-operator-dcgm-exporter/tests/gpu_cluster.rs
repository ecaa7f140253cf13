//! The GPUCluster's DCGM exporter (`nvidia-dcgm-exporter-dra`) rendered for NVIDIA's GPUCluster
//! cases: its embedded host engine (DCGM off, the default), the remote `nvidia-dcgm-dra` engine
//! (DCGM on), disabled, and with pod enrichment, the pod labels and annotations of `daemonsets`
//! and the exporter's own settings.
#![allow(clippy::unwrap_used)]

use gpu_operator_api::{GpuCluster, GpuClusterSpec};
use gpu_operator_core::{
    contract::Operand,
    fixtures::{self, children_values, with_cluster},
};
use gpu_operator_dcgm_exporter::DcgmExporterDra;

fn rendered(spec: serde_json::Value) -> serde_json::Value {
    let spec: GpuClusterSpec = serde_json::from_value(spec).unwrap();
    let cr = GpuCluster::new("gpu-cluster", spec);
    match with_cluster(&fixtures::image_env, |cluster| {
        DcgmExporterDra::validate(&cr, cluster)
    })
    .unwrap()
    {
        Some(input) => children_values(&DcgmExporterDra::render(&input)).unwrap(),
        None => serde_json::json!("disabled"),
    }
}

#[test]
fn embedded_engine() {
    let default = rendered(serde_json::json!({}));
    assert_eq!(
        default,
        rendered(serde_json::json!({"dcgmExporter": {"enabled": true}, "dcgm": {}}))
    );
    insta::assert_yaml_snapshot!(default);
}

#[test]
fn remote_engine() {
    insta::assert_yaml_snapshot!(rendered(serde_json::json!({"dcgm": {"enabled": true}})));
}

#[test]
fn disabled() {
    assert_eq!(
        rendered(
            serde_json::json!({"dcgmExporter": {"enabled": false}, "dcgm": {"enabled": true}})
        ),
        "disabled"
    );
}

#[test]
fn pod_metadata_and_settings() {
    insta::assert_yaml_snapshot!(rendered(serde_json::json!({
        "dcgmExporter": {"enablePodLabels": true, "annotations": {"scrape": "yes"},
            "config": {"name": "my-metrics"}, "hpcJobMapping": {"enabled": true},
            "serviceMonitor": {"enabled": true, "interval": "15s"},
            "service": {"type": "NodePort", "internalTrafficPolicy": "Local"},
            "resources": {"limits": {"memory": "1Gi"}}},
        "daemonsets": {"labels": {"team": "gpu"}, "annotations": {"note": "x"}},
        "hostPaths": {"kubeletRootDir": "/data/kubelet"},
    })));
}
