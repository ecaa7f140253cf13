//! Steps of the chart scenario: helm install/upgrade, the hook commands under the hooks' own
//! ServiceAccounts, and the checks that nothing of ours remains after an uninstall.

use std::{path::Path, process::Command};

use gpu_operator_api::{NvidiaDriver, nvidia_driver::NvidiaDriverState};
use gpu_operator_harness::{
    access::kubectl_ok,
    chart::{chart_dir, helm, helm_ok, kubectl_apply, render, token_kubeconfig},
    operator::{Operator, workspace_binary},
    wait_until,
};
use k8s_openapi::{
    api::{apps::v1::DaemonSet, node::v1::RuntimeClass, rbac::v1::ClusterRole},
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{Api, ResourceExt as _, api::ListParams};
use serde_json::Value;

use super::support::{Env, TIMEOUT};

/// NVIDIA's switch to NVIDIADrivers through the chart (`driver.nvidiaDriverCRD.enabled`): the API
/// server stores the default NVIDIADriver the chart renders (from the `driver.*` values), the
/// ClusterPolicy hands the driver over and the operator gives the NVIDIADriver its DaemonSets
/// and status; switching back deletes the NVIDIADriver and the ClusterPolicy is ready again.
pub async fn the_nvidia_driver_switch(env: &Env, release: &str) {
    let drivers: Api<NvidiaDriver> = Api::all(env.client.clone());
    let daemonsets: Api<DaemonSet> = Api::namespaced(env.client.clone(), &env.namespace);
    upgrade(release, &["--set", "driver.nvidiaDriverCRD.enabled=true"]);
    let cr = drivers.get("default").await.unwrap();
    assert!(
        cr.spec.default,
        "the chart's NVIDIADriver is the default one"
    );
    assert_eq!(cr.spec.image.version.as_deref(), Some("595.91.07"));
    wait_until(
        "the NVIDIADriver `default` to be served",
        TIMEOUT,
        || async {
            let served = drivers
                .get("default")
                .await?
                .status
                .is_some_and(|s| s.state != NvidiaDriverState::Disabled);
            let owned = daemonsets
                .list(&ListParams::default().labels("app.kubernetes.io/component=nvidia-driver"))
                .await?
                .items
                .iter()
                .any(|ds| {
                    ds.owner_references()
                        .iter()
                        .any(|o| o.kind == "NVIDIADriver" && o.name == "default")
                });
            Ok((served && owned).then_some(()))
        },
    )
    .await
    .unwrap();
    upgrade(release, &["--set", "driver.nvidiaDriverCRD.enabled=false"]);
    wait_until("the NVIDIADriver `default` to go", TIMEOUT, || async {
        Ok(drivers.get_opt("default").await?.is_none().then_some(()))
    })
    .await
    .unwrap();
}

/// `helm install --wait` of the chart as `release` into namespace `release`, without hooks.
/// Returns what helm printed on stderr (its warnings and the API server's).
pub fn install(release: &str, args: &[&str]) -> String {
    let chart = chart_dir();
    let output = helm()
        .args(["install", release])
        .arg(&chart)
        .args([
            "-n",
            release,
            "--create-namespace",
            "--no-hooks",
            "--wait",
            "--timeout",
            "2m",
        ])
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "helm install failed: {stderr}");
    stderr
}

/// `helm upgrade --reuse-values --wait` with `args`, without hooks.
pub fn upgrade(release: &str, args: &[&str]) {
    let chart = chart_dir();
    let mut all = vec![
        "upgrade",
        release,
        chart.to_str().unwrap(),
        "-n",
        release,
        "--reuse-values",
        "--no-hooks",
        "--wait",
        "--timeout",
        "2m",
    ];
    all.extend(args);
    helm_ok(&all).unwrap();
}

/// The scenario environment with a token of the ServiceAccount the chart installed.
pub async fn env(client: &kube::Client, release: &str, dir: &Path) -> Env {
    let (kubeconfig, user) = token_kubeconfig(client, release, release, dir)
        .await
        .unwrap();
    Env {
        client: client.clone(),
        namespace: release.to_owned(),
        kubeconfig,
        user,
        dir: dir.to_owned(),
    }
}

/// Waits until DaemonSet `name` has a generation above `before` and every reconciler of
/// `operator` has finished a reconcile after the reconciles counted in `reconciled` (taken before
/// the change); returns all generations then, when a wrong write by another reconciler would
/// have happened.
pub async fn wait_generation_change(
    env: &Env,
    operator: &Operator,
    name: &str,
    before: i64,
    reconciled: &std::collections::BTreeMap<String, f64>,
) -> std::collections::BTreeMap<String, i64> {
    wait_until(&format!("{name} to be updated"), TIMEOUT, || async {
        let ds = env.daemonsets().get(name).await?;
        Ok((ds.metadata.generation.unwrap_or_default() > before).then_some(()))
    })
    .await
    .unwrap();
    // The node labeller reconciles on a spec change only when it changes what its label decision
    // reads (sandbox workloads, the MIG layout to seed), which this upgrade does not.
    let names: Vec<String> = reconciled
        .keys()
        .filter(|r| r.as_str() != "node-labels")
        .cloned()
        .collect();
    super::quiet::wait_reconciled_after(operator, reconciled, &names, "the upgrade").await;
    super::generations(env).await
}

/// Applies the ServiceAccount and RBAC of hook template `template` (rendered with `set`, or the
/// defaults when it is empty), not its
/// Job, and returns a kubeconfig of the hook's ServiceAccount `name`.
pub async fn hook_identity(
    client: &kube::Client,
    release: &str,
    template: &str,
    set: &str,
    dir: &Path,
) -> (std::path::PathBuf, String, Value) {
    let args: &[&str] = if set.is_empty() { &[] } else { &["--set", set] };
    let yaml = render(release, release, &[template], args).unwrap();
    let mut job = Value::Null;
    let mut rbac = String::new();
    for doc in serde_yaml::Deserializer::from_str(&yaml) {
        let doc: Value = serde::Deserialize::deserialize(doc).unwrap();
        if doc["kind"] == "Job" {
            job = doc;
        } else if !doc.is_null() {
            rbac.push_str("---\n");
            rbac.push_str(&serde_yaml::to_string(&doc).unwrap());
        }
    }
    kubectl_apply(&rbac).unwrap();
    let name = job["spec"]["template"]["spec"]["serviceAccountName"]
        .as_str()
        .unwrap()
        .to_owned();
    let (kubeconfig, _) = token_kubeconfig(client, release, &name, dir).await.unwrap();
    (kubeconfig, name, job)
}

/// The arguments a hook Job runs our image with: it sets no `command`, so the image's entrypoint
/// (`/usr/bin/gpu-operator`, the Dockerfile's `ENTRYPOINT`) runs, from the operator's image.
pub fn hook_args(job: &Value) -> Vec<String> {
    let container = &job["spec"]["template"]["spec"]["containers"][0];
    assert!(
        container["command"].is_null(),
        "the hook Job overrides the image's entrypoint: {container}"
    );
    let image = container["image"].as_str().unwrap_or_default();
    assert!(
        image.starts_with("ghcr.io/gpu-operator-rs/gpu-operator:"),
        "the hook Job runs {image}, not the operator's image"
    );
    let dockerfile =
        std::fs::read_to_string(gpu_operator_harness::crd::repo_root().join("Dockerfile")).unwrap();
    assert!(
        dockerfile.contains(r#"ENTRYPOINT ["/usr/bin/gpu-operator"]"#),
        "the image's entrypoint is no longer the operator binary"
    );
    container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect()
}

/// Runs the operator binary with `args` and `--kubeconfig`; returns (success, stdout + stderr).
pub fn run_binary(args: &[&str], kubeconfig: &Path) -> (bool, String) {
    let output = Command::new(workspace_binary("gpu-operator"))
        .args(args)
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

/// Deletes the hook's ServiceAccount and RBAC (Helm's hook-delete-policy does it after a success).
pub fn remove_hook_identity(namespace: &str, name: &str) {
    for kind in ["clusterrolebinding", "clusterrole"] {
        let _ = kubectl_ok(&["delete", kind, name, "--ignore-not-found"]);
    }
    let _ = kubectl_ok(&[
        "delete",
        "serviceaccount",
        name,
        "-n",
        namespace,
        "--ignore-not-found",
    ]);
}

/// The pre-install/pre-upgrade hook: `gpu-operator crds apply` under the hook's ServiceAccount
/// brings stale CRDs (a ClusterPolicy schema without `kataManager`, an NVIDIADriver schema without
/// `virtualTopologyConfig`) back to the generated ones, and a second run changes nothing.
pub async fn the_crd_hook_updates_a_stale_crd(client: &kube::Client, release: &str, dir: &Path) {
    let (kubeconfig, name, job) = hook_identity(
        client,
        release,
        "templates/upgrade-crd.yaml",
        "operator.upgradeCRD=true",
        dir,
    )
    .await;
    let args = hook_args(&job);
    assert_eq!(args, ["crds", "apply"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let stale_fields = [
        ("clusterpolicies.nvidia.com", "kataManager"),
        ("nvidiadrivers.nvidia.com", "virtualTopologyConfig"),
    ];
    let has = |crd: &CustomResourceDefinition, field: &str| {
        let value = serde_json::to_value(crd).unwrap();
        !value["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
            ["properties"][field]
            .is_null()
    };
    for (crd_name, field) in stale_fields {
        let mut stale = serde_json::to_value(crds.get(crd_name).await.unwrap()).unwrap();
        for key in [
            "managedFields",
            "resourceVersion",
            "uid",
            "creationTimestamp",
            "generation",
        ] {
            stale["metadata"].as_object_mut().unwrap().remove(key);
        }
        stale.as_object_mut().unwrap().remove("status");
        stale["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
            ["properties"]
            .as_object_mut()
            .unwrap()
            .remove(field);
        kubectl_apply(&serde_json::to_string(&stale).unwrap()).unwrap();
        assert!(
            !has(&crds.get(crd_name).await.unwrap(), field),
            "{crd_name} did not go stale"
        );
    }

    // The Job's own command line, as its pod would run it.
    let (ok, output) = run_binary(&args, &kubeconfig);
    assert!(ok, "crds apply failed under the hook's RBAC: {output}");
    for (crd_name, field) in stale_fields {
        assert!(output.contains(&format!("{crd_name} updated")), "{output}");
        assert!(
            has(&crds.get(crd_name).await.unwrap(), field),
            "the stale {crd_name} was not updated"
        );
    }
    let (ok, output) = run_binary(&["crds", "apply"], &kubeconfig);
    for (crd_name, _) in stale_fields {
        assert!(
            ok && output.contains(&format!("{crd_name} unchanged")),
            "not idempotent: {output}"
        );
    }
    remove_hook_identity(release, &name);
}

/// After `helm uninstall`: no namespaced object, cluster RBAC, RuntimeClass or ClusterPolicy of
/// ours is left (the operands go with the ClusterPolicy through garbage collection).
pub async fn nothing_of_ours_remains(client: &kube::Client, release: &str) {
    wait_until("the operands to be garbage-collected", TIMEOUT, || async {
        let left = kubectl_ok(&[
            "get",
            "daemonsets,deployments,services,serviceaccounts,configmaps,roles,rolebindings,leases",
            "-n",
            release,
            "-o",
            "name",
        ])?;
        let left: Vec<&str> = left
            .lines()
            .filter(|l| {
                !matches!(*l, "serviceaccount/default" | "configmap/kube-root-ca.crt")
                    && !l.starts_with("lease.coordination.k8s.io/")
            })
            .collect();
        Ok(left.is_empty().then_some(()))
    })
    .await
    .unwrap_or_else(|error| {
        let left = kubectl_ok(&[
            "get",
            "all,roles,rolebindings,serviceaccounts,configmaps",
            "-n",
            release,
        ]);
        panic!("{error}: {left:?}")
    });
    let cluster_roles: Api<ClusterRole> = Api::all(client.clone());
    for role in cluster_roles.list(&ListParams::default()).await.unwrap() {
        let name = role.name_any();
        assert!(!name.starts_with(release), "ClusterRole {name} is left");
        assert!(
            role.labels()
                .get("app.kubernetes.io/managed-by")
                .map(String::as_str)
                != Some("gpu-operator"),
            "operand ClusterRole {name} is left"
        );
    }
    let bindings = kubectl_ok(&[
        "get",
        "clusterrolebindings,roles,rolebindings",
        "-A",
        "-o",
        "name",
    ])
    .unwrap();
    assert!(
        !bindings.contains(release),
        "RBAC of the release is left: {bindings}"
    );
    let classes: Api<RuntimeClass> = Api::all(client.clone());
    // Made by the tests themselves (labelled temporary), not by the chart.
    let ours = ListParams::default().labels(&format!("!{}", super::support::TEMPORARY));
    for class in classes.list(&ours).await.unwrap() {
        assert!(
            !class.name_any().starts_with("nvidia"),
            "RuntimeClass {} is left",
            class.name_any()
        );
    }
    let policies = kubectl_ok(&["get", "clusterpolicies", "-o", "name"]).unwrap();
    assert!(
        !policies.contains("cluster-policy"),
        "the ClusterPolicy is left"
    );
}

/// Uninstalls the release and deletes its namespace and hook RBAC when dropped (also on panic).
pub struct Cleanup(pub String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let release = &self.0;
        let _ = helm_ok(&[
            "uninstall",
            release,
            "-n",
            release,
            "--no-hooks",
            "--ignore-not-found",
        ]);
        for hook in ["upgrade-crd", "cleanup-node-labels"] {
            remove_hook_identity(release, &format!("{release}-{hook}"));
        }
        let _ = kubectl_ok(&[
            "delete",
            "namespace",
            release,
            "--ignore-not-found",
            "--wait=false",
        ]);
    }
}
