//! The remediation engine and its remediator's contract: medik8s Node Health Check run as a host
//! process (built by `cargo xtask nhc` from its Go module; its CRD taken from that module), and
//! the CRDs of Self Node Remediation's template and remediation kinds (written here as data,
//! with open schemas: no SNR controller runs, so a remediation object NHC creates stays until NHC
//! deletes it, which is what the test reads).

use std::{
    path::{Path, PathBuf},
    process::Stdio,
};

use gpu_operator_harness::{access::kubectl_ok, chart::kubectl_apply};
use serde_json::{Value, json};

/// Where `cargo xtask e2e` says Node Health Check is (`cargo xtask nhc` builds it there).
const NHC_DIR_ENV: &str = "GPU_OPERATOR_NHC_DIR";
/// NHC's CRD file in that directory (from the module's `config/crd/bases`).
const NHC_CRD_FILE: &str = "remediation.medik8s.io_nodehealthchecks.yaml";
/// NHC's CRD.
pub const NHC_CRD: &str = "nodehealthchecks.remediation.medik8s.io";
/// Self Node Remediation's API group, as its CRDs and NHC's default example name it.
pub const SNR_GROUP: &str = "self-node-remediation.medik8s.io";

/// The directory with NHC's `manager` and CRD; fails with the command that builds them.
pub fn nhc_dir() -> PathBuf {
    let dir = std::env::var_os(NHC_DIR_ENV).map(PathBuf::from);
    let built = dir
        .as_ref()
        .is_some_and(|d| d.join("manager").is_file() && d.join(NHC_CRD_FILE).is_file());
    assert!(
        built,
        "Node Health Check is not built ({NHC_DIR_ENV}={dir:?}): run `cargo xtask nhc` (it builds \
         github.com/medik8s/node-healthcheck-operator into the harness cache; where the Go module \
         proxy refuses it, set GPU_OPERATOR_NHC_SOURCE to a checkout of its tag) and run the e2e \
         tests with `cargo xtask e2e`, which sets {NHC_DIR_ENV}"
    );
    dir.unwrap_or_default()
}

/// Installs NHC's CRD from its module and Self Node Remediation's two CRDs; waits until served.
pub fn install_crds(nhc: &Path) {
    let crd = std::fs::read_to_string(nhc.join(NHC_CRD_FILE)).unwrap();
    kubectl_apply(&crd).unwrap();
    for (kind, plural) in [
        (
            "SelfNodeRemediationTemplate",
            "selfnoderemediationtemplates",
        ),
        ("SelfNodeRemediation", "selfnoderemediations"),
    ] {
        kubectl_apply(&snr_crd(kind, plural).to_string()).unwrap();
    }
    let names = [
        NHC_CRD.to_owned(),
        format!("selfnoderemediationtemplates.{SNR_GROUP}"),
        format!("selfnoderemediations.{SNR_GROUP}"),
    ];
    let crds: Vec<String> = names.iter().map(|n| format!("crd/{n}")).collect();
    let mut args = vec!["wait", "--for=condition=Established", "--timeout=60s"];
    args.extend(crds.iter().map(String::as_str));
    kubectl_ok(&args).unwrap();
}

/// A namespaced `v1alpha1` CRD of Self Node Remediation's group whose objects keep any fields.
fn snr_crd(kind: &str, plural: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{SNR_GROUP}")},
        "spec": {
            "group": SNR_GROUP,
            "names": {"kind": kind, "listKind": format!("{kind}List"), "plural": plural, "singular": kind.to_lowercase()},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1alpha1",
                "served": true,
                "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
            }],
        },
    })
}

/// Self Node Remediation's "automatic strategy" template (the one its operator creates), in
/// `namespace`.
pub fn snr_template(name: &str, namespace: &str) -> String {
    json!({
        "apiVersion": format!("{SNR_GROUP}/v1alpha1"),
        "kind": "SelfNodeRemediationTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"template": {"spec": {"remediationStrategy": "Automatic"}}},
    })
    .to_string()
}

/// Starts NHC's manager outside the cluster with the admin kubeconfig: no leader election, no
/// metrics or probe listener, its webhook server on a self-signed certificate (it always starts
/// one, on port 9443), `DEPLOYMENT_NAMESPACE` = `namespace`. Killed on drop; logs to `dir`.
pub fn start(nhc: &Path, namespace: &str, dir: &Path) -> tokio::process::Child {
    // controller-runtime reads the webhook's certificate from $TMPDIR/k8s-webhook-server/serving-certs.
    let certs = dir.join("k8s-webhook-server/serving-certs");
    std::fs::create_dir_all(&certs).unwrap();
    let status = std::process::Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args(["-subj", "/CN=localhost", "-keyout"])
        .arg(certs.join("tls.key"))
        .arg("-out")
        .arg(certs.join("tls.crt"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("openssl makes the webhook server's self-signed certificate");
    assert!(status.success());
    let log = std::fs::File::create(dir.join("nhc.log")).unwrap();
    tokio::process::Command::new(nhc.join("manager"))
        .args([
            "--leader-elect=false",
            "--metrics-bind-address=0",
            "--health-probe-bind-address=0",
        ])
        .env("KUBECONFIG", std::env::var_os("KUBECONFIG").unwrap())
        .env("DEPLOYMENT_NAMESPACE", namespace)
        .env("TMPDIR", dir)
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// Deletes what [`install_crds`] installed (their objects go with them).
pub fn remove_crds() {
    for name in [
        NHC_CRD.to_owned(),
        format!("selfnoderemediationtemplates.{SNR_GROUP}"),
        format!("selfnoderemediations.{SNR_GROUP}"),
    ] {
        let _ = kubectl_ok(&["delete", "crd", &name, "--ignore-not-found", "--wait=false"]);
    }
}
