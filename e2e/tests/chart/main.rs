//! The Helm chart end to end: `helm install --wait` (kwok makes the operator pod Ready; the
//! operator itself runs as a host process under the chart's ServiceAccount) gives a ready
//! ClusterPolicy; `helm upgrade` rolls only the DaemonSet whose values changed; the CRD hook's
//! `gpu-operator crds apply` updates a stale CRD in place under the hook's own RBAC;
//! `driver.nvidiaDriverCRD.enabled` hands the driver to the chart's default NVIDIADriver and back;
//! `helm
//! uninstall` plus the node cleanup hook (on by default) leave nothing of ours behind, on the nodes
//! neither (and, as a positive control, the driver upgrade's keys stay without it); a reinstall works; a typo
//! in the values fails the install with the key named. A default install is quiet: helm prints no
//! warning (the API server's included: the CRD's schema formats, Pod Security), and the
//! ClusterPolicy draws no Warning Event until a test sets a deprecated value on purpose.
//!
//! Hooks: kwok runs no containers (it marks a Job's pod `Succeeded` without running it), so a hook
//! Job would finish having done nothing. The scenario installs with
//! `--no-hooks` and runs each hook's command as a host process under a token of the hook's own
//! ServiceAccount, with the hook's RBAC rendered from the chart; the chart's unit tests check that
//! the hook Jobs render with those commands.
#![cfg(feature = "e2e")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::large_futures
)]

use gpu_operator_e2e::quiet;
mod node_keys;
mod quiet_install;
mod steps;
use gpu_operator_e2e::scenario as support;

use std::collections::BTreeMap;

use gpu_operator_harness::{
    access::kubectl_ok,
    chart::{chart_dir, helm, helm_ok},
    client,
    crd::ensure_crd,
    unique_name,
};
use kube::ResourceExt as _;
use support::{Env, PLUGIN, VALIDATOR, is_ready, wait_ds_ready, wait_policy};

/// The name the chart gives its ClusterPolicy.
const POLICY: &str = "cluster-policy";

#[tokio::test]
async fn install_upgrade_crd_hook_uninstall_and_reinstall() {
    let client = client().await.unwrap();
    ensure_crd().await.unwrap();
    support::ensure_runtime_class();
    // The release (and namespace) name contains the chart name, so objects are named after it.
    let release = unique_name("gpu-operator-chart");
    let _cleanup = steps::Cleanup(release.clone());
    let dir = std::env::temp_dir().join(&release);
    std::fs::create_dir_all(&dir).unwrap();

    let keys_before = node_keys::snapshot(&client).await;
    quiet_install::install_quietly(&release);
    let env = steps::env(&client, &release, &dir).await;
    let operator = env.start(&[]);
    let policy = wait_policy(
        &env,
        POLICY,
        "the chart's ClusterPolicy to be ready",
        is_ready,
    )
    .await;
    quiet_install::no_warning_event_until_a_deprecated_value_is_set(POLICY, &policy.uid().unwrap())
        .await;
    assert_eq!(
        policy
            .labels()
            .get("app.kubernetes.io/managed-by")
            .map(String::as_str),
        Some("Helm")
    );
    wait_ds_ready(&env, PLUGIN, None).await;
    wait_ds_ready(&env, VALIDATOR, None).await;

    // An upgrade that changes only the device plugin's values rolls only its DaemonSet.
    let before = generations(&env).await;
    let reconciled = quiet::reconciles(&operator).await;
    steps::upgrade(
        &release,
        &[
            "--set",
            "devicePlugin.env[0].name=E2E,devicePlugin.env[0].value=upgraded",
        ],
    );
    let after =
        steps::wait_generation_change(&env, &operator, PLUGIN, before[PLUGIN], &reconciled).await;
    wait_policy(
        &env,
        POLICY,
        "the ClusterPolicy to be ready after the upgrade",
        is_ready,
    )
    .await;
    for (name, generation) in &before {
        if name != PLUGIN {
            assert_eq!(
                after[name], *generation,
                "{name} changed although its values did not"
            );
        }
    }

    steps::the_crd_hook_updates_a_stale_crd(&client, &release, &dir).await;
    steps::the_nvidia_driver_switch(&env, &release).await;
    wait_policy(
        &env,
        POLICY,
        "the ClusterPolicy to be ready with the driver back",
        is_ready,
    )
    .await;

    // Driver upgrades are on by default: the nodes carry the upgrade's keys.
    node_keys::wait_for_upgrade_keys(&client).await;
    // Uninstall: the operator pod would stop with its Deployment; the host process stops here.
    operator.stop().unwrap();
    let persons = node_keys::persons_keys(&client).await;
    helm_ok(&[
        "uninstall",
        &release,
        "-n",
        &release,
        "--no-hooks",
        "--wait",
    ])
    .unwrap();
    node_keys::uninstall_leaves_no_key_of_ours(&client, &release, &dir, &keys_before, &persons)
        .await;
    drop(persons);
    steps::nothing_of_ours_remains(&client, &release).await;

    // Reinstall into the same namespace.
    let _ = steps::install(&release, &[]);
    let env = steps::env(&client, &release, &dir).await;
    let operator = env.start(&[]);
    wait_policy(
        &env,
        POLICY,
        "the reinstalled ClusterPolicy to be ready",
        is_ready,
    )
    .await;
    operator.stop().unwrap();
    helm_ok(&[
        "uninstall",
        &release,
        "-n",
        &release,
        "--no-hooks",
        "--wait",
    ])
    .unwrap();
}

/// DaemonSet generations by name.
async fn generations(env: &Env) -> BTreeMap<String, i64> {
    env.daemonsets()
        .list(&kube::api::ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|ds| (ds.name_any(), ds.metadata.generation.unwrap_or_default()))
        .collect()
}

#[test]
fn a_typo_in_the_values_fails_the_install_with_the_key_named() {
    let release = unique_name("gpu-operator-typo");
    let chart = chart_dir();
    for (set, named) in [
        ("mig.strategy=auto", "/mig/strategy"),
        ("devicePlugin.confg.name=x", "'confg'"),
    ] {
        let output = helm()
            .args(["install", &release])
            .arg(&chart)
            .args([
                "-n",
                &release,
                "--create-namespace",
                "--no-hooks",
                "--set",
                set,
            ])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "--set {set} was accepted");
        assert!(
            stderr.contains(named),
            "--set {set}: the error does not name {named}: {stderr}"
        );
    }
    let namespaces = kubectl_ok(&["get", "namespace", "-o", "name"]).unwrap();
    assert!(
        !namespaces.contains(&release),
        "a failed install created its namespace"
    );
}
