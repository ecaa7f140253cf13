//! `gpuCluster.deployCR`: off by default; on, the chart renders the GPUCluster `gpu-cluster`
//! from the `draDriver.*` values (NVIDIA's v26.7 defaults), `dcgm.*`, `dcgmExporter.*`,
//! `hostPaths.*` and `daemonsets.*`, every field one the CRD's schema knows, kept by Helm on
//! uninstall; NVIDIA's own v26.7 values file renders one that reads as our `GpuCluster`. Needs
//! the harness's helm.

use gpu_operator_api::GpuCluster;
use serde_json::{Value, json};

use super::nvidia_driver::undeclared;
use super::{find, nvidia_values_files, render, render_docs, render_error};
use crate::codegen::workspace_root;

fn gpu_clusters(docs: &[Value]) -> Vec<&Value> {
    docs.iter().filter(|d| d["kind"] == "GPUCluster").collect()
}

fn spec_schema() -> Value {
    let path = workspace_root().join("crds/gpuclusters.nvidia.com.yaml");
    let crd: Value = serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"].clone()
}

/// The rendered GPUCluster: every key declared by the CRD, and read as our type.
fn rendered(docs: &[Value]) -> (Value, GpuCluster) {
    let cluster = find(docs, "GPUCluster", "gpu-cluster").clone();
    let mut unknown = Vec::new();
    undeclared(&spec_schema(), &cluster["spec"], "spec", &mut unknown);
    assert!(unknown.is_empty(), "not in the CRD: {unknown:?}");
    let typed: GpuCluster = serde_json::from_value(cluster.clone()).unwrap();
    (cluster, typed)
}

#[test]
#[ignore = "runs helm: `cargo xtask cluster up` builds it, `cargo xtask ci` runs this"]
fn the_gpu_cluster_is_rendered_with_nvidias_defaults_when_switched_on() {
    assert!(gpu_clusters(&render(&[])).is_empty(), "off by default");
    let docs = render(&["--set", "gpuCluster.deployCR=true"]);
    let (cluster, typed) = rendered(&docs);
    assert_eq!(
        cluster["metadata"]["annotations"]["helm.sh/resource-policy"], "keep",
        "its teardown needs the operator: Helm must not delete it together with it"
    );
    assert_eq!(
        cluster["spec"]["draDriver"],
        json!({
            "repository": "nvcr.io/nvidia",
            "image": "dra-driver-nvidia-gpu",
            "version": "v0.5.0",
            "imagePullPolicy": "IfNotPresent",
            "computeDomains": {"enabled": true},
        })
    );
    assert!(typed.spec.dra_driver.compute_domains_enabled());
    assert!(typed.spec.dcgm_exporter_enabled() && !typed.spec.dcgm_enabled());
    assert_eq!(
        typed.spec.host_paths.driver_install_dir(),
        "/run/nvidia/driver"
    );
    assert_eq!(
        cluster["spec"]["daemonsets"]["priorityClassName"],
        "system-node-critical"
    );
    // Both custom resources together are allowed: both are reconciled.
    find(&docs, "ClusterPolicy", "cluster-policy");
}

#[test]
#[ignore = "runs helm: `cargo xtask cluster up` builds it, `cargo xtask ci` runs this"]
fn every_dra_driver_value_arrives_in_the_gpu_cluster() {
    let sets = [
        "gpuCluster.deployCR=true",
        "clusterPolicy.deployCR=false",
        "draDriver.repository=registry.example.com/nvidia",
        "draDriver.version=v0.6.0",
        "draDriver.imagePullPolicy=Always",
        "draDriver.imagePullSecrets[0]=pull",
        "draDriver.featureGates.MPSSupport=true",
        "draDriver.gpus.kubeletPlugin.env[0].name=LOG_LEVEL",
        "draDriver.gpus.kubeletPlugin.env[0].value=debug",
        "draDriver.gpus.kubeletPlugin.healthcheck.port=52000",
        "draDriver.computeDomains.enabled=false",
        "draDriver.computeDomains.controller.resources.limits.memory=1Gi",
        "draDriver.computeDomains.kubeletPlugin.healthcheck.enabled=false",
        "dcgm.enabled=true",
        "dcgmExporter.enabled=false",
        "hostPaths.driverInstallDir=/",
        "hostPaths.kubeletRootDir=/var/lib/k0s/kubelet",
        "daemonsets.priorityClassName=gpu-critical",
    ];
    let args: Vec<&str> = sets.iter().flat_map(|set| ["--set", set]).collect();
    let docs = render(&args);
    assert!(
        docs.iter().all(|d| d["kind"] != "ClusterPolicy"),
        "the GPUCluster alone"
    );
    let (cluster, typed) = rendered(&docs);
    let dra = &typed.spec.dra_driver;
    assert_eq!(
        (
            dra.image.repository.as_deref(),
            dra.image.version.as_deref()
        ),
        (Some("registry.example.com/nvidia"), Some("v0.6.0"))
    );
    assert_eq!(cluster["spec"]["draDriver"]["imagePullPolicy"], "Always");
    assert_eq!(
        cluster["spec"]["draDriver"]["imagePullSecrets"],
        json!(["pull"])
    );
    assert_eq!(dra.feature_gates().get("MPSSupport"), Some(&true));
    assert_eq!(
        cluster["spec"]["draDriver"]["gpus"]["kubeletPlugin"]["env"],
        json!([{"name": "LOG_LEVEL", "value": "debug"}])
    );
    assert_eq!(dra.gpus.kubelet_plugin.healthcheck_port(51516), Some(52000));
    assert!(!dra.compute_domains_enabled());
    assert_eq!(
        cluster["spec"]["draDriver"]["computeDomains"]["controller"]["resources"]["limits"]["memory"],
        "1Gi"
    );
    assert_eq!(
        dra.compute_domains.kubelet_plugin.healthcheck_port(51515),
        None
    );
    assert!(typed.spec.dcgm_enabled() && !typed.spec.dcgm_exporter_enabled());
    assert_eq!(typed.spec.host_paths.driver_install_dir(), "/");
    assert_eq!(
        typed.spec.host_paths.kubelet_root_dir(),
        "/var/lib/k0s/kubelet"
    );
    assert_eq!(
        typed.spec.daemonsets.priority_class_name.as_deref(),
        Some("gpu-critical")
    );
}

#[test]
#[ignore = "runs helm: `cargo xtask cluster up` builds it, `cargo xtask ci` runs this"]
fn a_compute_domains_switch_that_is_not_a_boolean_is_refused() {
    let error = render_error(&[
        "--set",
        "gpuCluster.deployCR=true",
        "--set",
        "draDriver.computeDomains.enabled=maybe",
    ]);
    assert!(
        error.contains("draDriver/computeDomains/enabled"),
        "{error}"
    );
    // Without the schema, the template refuses what its normalisation cannot read as a boolean.
    let error = render_error(&[
        "--skip-schema-validation",
        "--set",
        "gpuCluster.deployCR=true",
        "--set-json",
        "draDriver.computeDomains.enabled=1",
    ]);
    assert!(
        error.contains("draDriver.computeDomains.enabled=1 is not a boolean"),
        "{error}"
    );
}

#[test]
#[ignore = "runs helm: `cargo xtask cluster up` builds it, `cargo xtask ci` runs this"]
fn nvidias_v26_7_values_render_a_gpu_cluster_of_ours() {
    let file = nvidia_values_files()
        .into_iter()
        .find(|p| p.ends_with("v26.7.0.yaml"))
        .unwrap();
    let docs = render_docs(
        "nvidia",
        &[
            "-f",
            file.to_str().unwrap(),
            "--set",
            "gpuCluster.deployCR=true",
        ],
    );
    let (_, typed) = rendered(&docs);
    let dra = &typed.spec.dra_driver;
    assert_eq!(
        (
            dra.image.repository.as_deref(),
            dra.image.name.as_deref(),
            dra.image.version.as_deref()
        ),
        (
            Some("nvcr.io/nvidia"),
            Some("dra-driver-nvidia-gpu"),
            Some("v0.5.0")
        )
    );
    assert!(dra.compute_domains_enabled());
}
