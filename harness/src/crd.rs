//! Installing the generated ClusterPolicy, NVIDIADriver and GPUCluster CRDs on the test cluster, once per test
//! process; the Prometheus Operator's ServiceMonitor CRD for the tests that need one.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::Context as _;
use tokio::sync::OnceCell;

use crate::{access::kubectl_ok, wait_until};

/// The CRDs this operator serves, as `cargo xtask codegen` writes them to `crds/`.
const CRD_NAMES: [&str; 4] = [
    "clusterpolicies.nvidia.com",
    "nvidiadrivers.nvidia.com",
    "gpuclusters.nvidia.com",
    // With ComputeDomainClique in the same file.
    "computedomains.resource.nvidia.com",
];
const FIELD_MANAGER: &str = "gpu-operator-e2e";

/// The repository's root directory.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

static INSTALLED: OnceCell<()> = OnceCell::const_new();

/// Installs (or updates) the generated CRDs (ClusterPolicy, NVIDIADriver, GPUCluster) with server-side apply
/// and waits until they are Established and served. Runs once per test process.
pub async fn ensure_crd() -> anyhow::Result<()> {
    INSTALLED.get_or_try_init(install).await.copied()
}

async fn install() -> anyhow::Result<()> {
    for crd_name in CRD_NAMES {
        let crd = repo_root().join(format!("crds/{crd_name}.yaml"));
        let crd = crd.to_str().context("CRD path is not UTF-8")?;
        kubectl_ok(&[
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager",
            FIELD_MANAGER,
            "-f",
            crd,
        ])?;
    }
    for crd_name in CRD_NAMES {
        wait_until(
            &format!("the CRD {crd_name} to be Established"),
            Duration::from_secs(60),
            || async {
                let status = kubectl_ok(&[
                    "get",
                    "crd",
                    crd_name,
                    "-o",
                    "jsonpath={.status.conditions[?(@.type==\"Established\")].status}",
                ])
                // A brand-new CRD has no conditions yet, which the jsonpath filter reports as an
                // error.
                .unwrap_or_default();
                Ok((status.trim() == "True").then_some(()))
            },
        )
        .await?;
        // kubectl's discovery cache may lag behind a new CRD.
        wait_until(
            &format!("{crd_name} to be served"),
            Duration::from_secs(60),
            || async {
                Ok(kubectl_ok(&["get", crd_name, "-o", "name"])
                    .ok()
                    .map(|_| ()))
            },
        )
        .await?;
    }
    Ok(())
}

/// The Prometheus Operator's ServiceMonitor CRD.
pub const SERVICE_MONITOR_CRD: &str = "servicemonitors.monitoring.coreos.com";

/// A minimal ServiceMonitor CRD: the kind, with any content.
pub const SERVICE_MONITOR_CRD_YAML: &str = r"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: servicemonitors.monitoring.coreos.com
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names: {plural: servicemonitors, singular: servicemonitor, kind: ServiceMonitor, listKind: ServiceMonitorList}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
";

/// Removes the ServiceMonitor CRD when dropped, also when a step panics.
pub struct ServiceMonitorCrdCleanup;

impl Drop for ServiceMonitorCrdCleanup {
    fn drop(&mut self) {
        let _ = kubectl_ok(&[
            "delete",
            "crd",
            SERVICE_MONITOR_CRD,
            "--ignore-not-found",
            "--wait=false",
        ]);
    }
}
