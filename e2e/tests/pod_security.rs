//! The operator's own pods meet the `restricted` Pod Security Standard, judged by the real API
//! server's PodSecurity admission: every pod the chart runs from the operator image (the
//! Deployment, and the hook Jobs of `operator.upgradeCRD`, `cleanupCRD`, `cleanupNodeLabels`) is
//! created, server-side dry run, in a namespace enforcing `restricted`, and admitted. The
//! discovery agent, which reads host paths, is refused there (the positive control that the
//! namespace enforces): it belongs in the privileged operator namespace, like the operands.
#![cfg(feature = "e2e")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use gpu_operator_harness::{chart::render, client, unique_name};
use k8s_openapi::api::core::v1::{Namespace, Pod, ServiceAccount};
use kube::{
    Api,
    api::{DeleteParams, PostParams},
};
use serde::Deserialize as _;
use serde_json::{Value, json};

/// Every pod template the chart renders, with the kind and name of its owner.
fn pod_templates(release: &str) -> Vec<(String, Value)> {
    let rendered = render(
        release,
        release,
        &[],
        &[
            "--set",
            "operator.upgradeCRD=true,operator.cleanupCRD=true,operator.cleanupNodeLabels=true",
        ],
    )
    .unwrap();
    serde_yaml::Deserializer::from_str(&rendered)
        .filter_map(|doc| Value::deserialize(doc).ok())
        .filter_map(|doc| {
            let template = doc.pointer("/spec/template")?.clone();
            Some((
                format!(
                    "{} {}",
                    doc["kind"].as_str()?,
                    doc["metadata"]["name"].as_str()?
                ),
                template,
            ))
        })
        .collect()
}

/// Creates a pod of `template` in `namespace` as a server-side dry run: the admission verdict.
async fn admitted(pods: &Api<Pod>, template: &Value) -> Result<(), String> {
    let mut pod = json!({"metadata": {"generateName": "pss-"}, "spec": template["spec"]});
    if let Some(labels) = template.pointer("/metadata/labels") {
        pod["metadata"]["labels"] = labels.clone();
    }
    let pod: Pod = serde_json::from_value(pod).unwrap();
    let params = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    match pods.create(&params, &pod).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) => Err(status.message),
        Err(other) => panic!("{other}"),
    }
}

#[tokio::test]
async fn the_operators_pods_are_admitted_under_the_restricted_standard() {
    let client = client().await.unwrap();
    let release = unique_name("gpu-operator-pss");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace = json!({"metadata": {"name": release, "labels": {
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/enforce-version": "latest",
    }}});
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(namespace).unwrap(),
        )
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &release);

    let templates = pod_templates(&release);
    // Their ServiceAccounts, so admission judges the pods and not a missing account.
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &release);
    let mut names: Vec<&str> = templates
        .iter()
        .filter_map(|(_, t)| t.pointer("/spec/serviceAccountName")?.as_str())
        .collect();
    names.sort_unstable();
    names.dedup();
    for name in names {
        let account = json!({"metadata": {"name": name}});
        accounts
            .create(
                &PostParams::default(),
                &serde_json::from_value(account).unwrap(),
            )
            .await
            .unwrap();
    }
    let mut checked = Vec::new();
    for (owner, template) in &templates {
        let verdict = admitted(&pods, template).await;
        if owner.ends_with("-node-discovery") {
            let message = verdict.expect_err("the discovery agent reads host paths");
            assert!(
                message.contains("violates PodSecurity \"restricted:latest\"")
                    && message.contains("hostPath"),
                "{message}"
            );
        } else {
            verdict.unwrap_or_else(|message| panic!("{owner}: {message}"));
            checked.push(owner.clone());
        }
    }
    checked.sort();
    assert_eq!(
        checked,
        [
            "Deployment gpu-operator".to_owned(),
            format!("Job {release}-cleanup-crd"),
            format!("Job {release}-cleanup-node-labels"),
            format!("Job {release}-upgrade-crd"),
        ],
        "every pod of the operator image was judged"
    );
    namespaces
        .delete(&release, &DeleteParams::default())
        .await
        .unwrap();
}
