//! A default install is quiet: no warning from helm or from the API server (about the chart's
//! objects and its CRD), and no Warning Event on the ClusterPolicy until a deprecated value is set
//! on purpose (the positive control of the query).

use gpu_operator_harness::{
    access::{kubectl, kubectl_ok},
    chart::chart_dir,
    wait_until,
};

use super::{steps::install, support::TIMEOUT};

/// Installs the chart with default values (`install`) and fails on any warning: helm's, and the
/// API server's about the chart's objects and its CRD.
pub fn install_quietly(release: &str) {
    let crd = crd_apply_warnings();
    assert!(
        !crd.to_lowercase().contains("warning"),
        "the API server warns about the chart's CRD:\n{crd}"
    );
    let install = install(release, &[]);
    assert!(
        !install.to_lowercase().contains("warning"),
        "helm install with default values warned:\n{install}"
    );
}

/// The chart's CRD with a server-side dry-run apply: what the API server warns about it (`helm
/// install` prints the same when it creates the CRD; the CRD of before this check drew `Warning:
/// unrecognized format "uint32"`).
fn crd_apply_warnings() -> String {
    let crd = chart_dir().join("crds/clusterpolicies.nvidia.com.yaml");
    let output = kubectl()
        .args([
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager=gpu-operator-e2e-dry-run",
            "--dry-run=server",
            "-f",
        ])
        .arg(&crd)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{stderr}");
    stderr
}

/// The reasons of the Warning Events about the object with `uid`.
fn warning_events(uid: &str) -> Vec<String> {
    let selector = format!("involvedObject.uid={uid},type=Warning");
    let out = kubectl_ok(&[
        "get",
        "events",
        "-A",
        "--field-selector",
        &selector,
        "-o",
        "jsonpath={range .items[*]}{.reason}: {.message}{\"\\n\"}{end}",
    ])
    .unwrap();
    out.lines().map(str::to_owned).collect()
}

/// The ClusterPolicy `policy` (`uid`) has no Warning Event; then a deprecated field set to a
/// value that changes behaviour (`cdi.default: true`) draws a `DeprecatedField` one (the positive
/// control of the query), and is reset.
pub async fn no_warning_event_until_a_deprecated_value_is_set(policy: &str, uid: &str) {
    assert_eq!(
        warning_events(uid),
        Vec::<String>::new(),
        "a default install drew Warning Events"
    );
    let patch = |default: bool| {
        kubectl_ok(&[
            "patch",
            "clusterpolicy",
            policy,
            "--type",
            "merge",
            "-p",
            &format!(r#"{{"spec":{{"cdi":{{"default":{default}}}}}}}"#),
        ])
        .unwrap();
    };
    patch(true);
    wait_until("a DeprecatedField Warning Event", TIMEOUT, || async {
        Ok(warning_events(uid)
            .iter()
            .any(|e| e.starts_with("DeprecatedField: spec.cdi.default"))
            .then_some(()))
    })
    .await
    .unwrap();
    patch(false);
}
