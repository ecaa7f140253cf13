//! The shipped GPU observability end to end, with the operator as a host process under the
//! chart's RBAC and its ClusterPolicy rendered from the chart's values: with
//! `dcgmExporter.prometheusRule.enabled` and no PrometheusRule CRD the exporter's condition and a
//! Warning Event say so while the dashboard ConfigMaps (labelled for Grafana's sidecar) appear;
//! installing the CRD creates the PrometheusRule; a values change updates the rule and the
//! ConfigMaps; disabling both removes them; an invalid threshold is refused by the API server
//! with the key named.
#![cfg(feature = "e2e")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::large_futures
)]

use gpu_operator_e2e::scenario as support;

use gpu_operator_api::{ClusterPolicy, ClusterPolicySpec, conditions::operand};
use gpu_operator_harness::{access::kubectl_ok, chart::render, unique_name, wait_until};
use k8s_openapi::api::core::v1::{ConfigMap, Event};
use kube::{
    Api,
    api::{ListParams, Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};

use support::{Cleanup, Env, IMAGES, TIMEOUT, condition, setup, wait_policy};

const RULE_CRD: &str = "prometheusrules.monitoring.coreos.com";
const RULE: &str = "nvidia-gpu-alerts";
const DASHBOARDS: [&str; 3] = [
    "nvidia-gpu-dashboard-fleet",
    "nvidia-gpu-dashboard-cost",
    "nvidia-gpu-dashboard-operator",
];

/// A minimal PrometheusRule CRD: the kind, with any content.
const RULE_CRD_YAML: &str = r"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: prometheusrules.monitoring.coreos.com
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names: {plural: prometheusrules, singular: prometheusrule, kind: PrometheusRule, listKind: PrometheusRuleList}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
";

/// Removes the PrometheusRule CRD when dropped, also when a step panics.
struct CrdCleanup;

impl Drop for CrdCleanup {
    fn drop(&mut self) {
        let _ = kubectl_ok(&[
            "delete",
            "crd",
            RULE_CRD,
            "--ignore-not-found",
            "--wait=false",
        ]);
    }
}

/// The ClusterPolicy spec the chart renders with `sets` (`--set` values).
fn chart_spec(env: &Env, sets: &[&str]) -> Value {
    let mut args = Vec::new();
    for set in sets {
        args.extend(["--set", set]);
    }
    let yaml = render(
        &env.namespace,
        &env.namespace,
        &["templates/clusterpolicy.yaml"],
        &args,
    )
    .unwrap();
    let policy: Value = serde_yaml::from_str(&yaml).unwrap();
    policy["spec"].clone()
}

fn rule(env: &Env) -> Option<Value> {
    let json = kubectl_ok(&[
        "get",
        "prometheusrule",
        RULE,
        "-n",
        &env.namespace,
        "-o",
        "json",
    ])
    .ok()?;
    serde_json::from_str(&json).ok()
}

/// The expression of alert `name` in the live PrometheusRule.
fn expr_of(rule: &Value, name: &str) -> Option<String> {
    rule["spec"]["groups"]
        .as_array()?
        .iter()
        .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
        .find(|r| r["alert"] == name)
        .and_then(|r| r["expr"].as_str().map(str::to_owned))
}

#[tokio::test]
async fn alert_rules_and_dashboards_follow_the_values_and_the_crd() {
    let env = setup().await;
    let _ = kubectl_ok(&["delete", "crd", RULE_CRD, "--ignore-not-found"]);
    let operator = env.start(&IMAGES);
    let name = unique_name("cluster-policy");
    let _cleanup = Cleanup {
        namespace: env.namespace.clone(),
        policies: vec![name.clone()],
    };
    let _crd = CrdCleanup;
    let on = [
        "dcgmExporter.prometheusRule.enabled=true",
        "dcgmExporter.grafanaDashboards.enabled=true",
    ];
    let spec: ClusterPolicySpec = serde_json::from_value(chart_spec(&env, &on)).unwrap();
    env.policies()
        .create(&PostParams::default(), &ClusterPolicy::new(&name, spec))
        .await
        .unwrap();
    let maps: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.namespace);
    missing_crd_is_reported_and_dashboards_appear(&env, &name, &maps).await;
    the_rule_follows_its_crd(&env).await;
    a_values_change_reaches_the_rule_and_the_dashboards(&env, &name, &maps, &on).await;
    an_invalid_threshold_is_refused(&env, &name).await;
    disabling_removes_both(&env, &name, &maps).await;
    operator.stop().unwrap();
}

/// Replaces the policy's `dcgmExporter` section with the one of `spec` (a merge patch of the
/// section, with the keys `spec` drops set to null).
async fn patch_spec(env: &Env, name: &str, spec: Value) {
    let live = env.policies().get(name).await.unwrap();
    let mut exporter = spec["dcgmExporter"].clone();
    let old = serde_json::to_value(&live.spec.dcgm_exporter).unwrap();
    for key in ["prometheusRule", "grafanaDashboards"] {
        if exporter.get(key).is_none() && old.get(key).is_some() {
            exporter[key] = Value::Null;
        }
    }
    env.policies()
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"dcgmExporter": exporter}})),
        )
        .await
        .unwrap();
}

async fn warning_event(env: &Env, policy: &str, reason: &str) {
    let events: Api<Event> = Api::all(env.client.clone());
    let event = wait_until(&format!("a Warning Event {reason}"), TIMEOUT, || async {
        let list = events
            .list(&ListParams::default().fields(&format!("involvedObject.name={policy}")))
            .await?;
        Ok(list
            .items
            .into_iter()
            .find(|e| e.type_.as_deref() == Some("Warning") && e.reason.as_deref() == Some(reason)))
    })
    .await
    .unwrap();
    assert!(event.message.unwrap_or_default().contains(RULE_CRD));
}

/// No CRD: the condition and an Event name it; the dashboards need no CRD.
async fn missing_crd_is_reported_and_dashboards_appear(
    env: &Env,
    name: &str,
    maps: &Api<ConfigMap>,
) {
    let policy = wait_policy(
        env,
        name,
        "DCGMExporterReady to name the missing rule CRD",
        |p| {
            condition(p, operand::DCGM_EXPORTER_READY).is_some_and(|c| c.message.contains(RULE_CRD))
        },
    )
    .await;
    let message = &condition(&policy, operand::DCGM_EXPORTER_READY)
        .unwrap()
        .message;
    assert!(
        message.contains("dcgmExporter.prometheusRule.enabled"),
        "{message}"
    );
    warning_event(env, name, "PrometheusRuleCRDMissing").await;
    for dashboard in DASHBOARDS {
        let map = wait_until(&format!("ConfigMap {dashboard}"), TIMEOUT, || async {
            Ok(maps.get_opt(dashboard).await?)
        })
        .await
        .unwrap();
        assert_eq!(
            map.metadata
                .labels
                .unwrap()
                .get("grafana_dashboard")
                .map(String::as_str),
            Some("1")
        );
        let data = map.data.unwrap();
        let (key, json) = data.iter().next().unwrap();
        assert!(
            std::path::Path::new(key)
                .extension()
                .is_some_and(|e| e == "json"),
            "{key}"
        );
        let dashboard: Value = serde_json::from_str(json).unwrap();
        assert!(!dashboard["panels"].as_array().unwrap().is_empty());
    }
    assert!(rule(env).is_none());
}

/// The CRD arrives: the rule is created with the default thresholds.
async fn the_rule_follows_its_crd(env: &Env) {
    let file = env.dir.join("prometheusrule-crd.yaml");
    std::fs::write(&file, RULE_CRD_YAML).unwrap();
    kubectl_ok(&["apply", "-f", file.to_str().unwrap()]).unwrap();
    let live = wait_until("the PrometheusRule", TIMEOUT, || async { Ok(rule(env)) })
        .await
        .unwrap();
    let hot = expr_of(&live, "GPUTemperatureHigh").unwrap();
    assert_eq!(hot, "DCGM_FI_DEV_GPU_TEMP > 85");
    assert_eq!(live["spec"]["groups"].as_array().unwrap().len(), 4);
}

/// A values change reaches the rule and the ConfigMaps.
async fn a_values_change_reaches_the_rule_and_the_dashboards(
    env: &Env,
    name: &str,
    maps: &Api<ConfigMap>,
    on: &[&str],
) {
    let mut changed = on.to_vec();
    changed.extend([
        "dcgmExporter.prometheusRule.thresholds.temperatureCelsius=90",
        "dcgmExporter.grafanaDashboards.labels.grafana_dashboard=gpu",
    ]);
    patch_spec(env, name, chart_spec(env, &changed)).await;
    wait_until("the rule to use 90 °C", TIMEOUT, || async {
        Ok(rule(env)
            .and_then(|r| expr_of(&r, "GPUTemperatureHigh"))
            .filter(|e| e == "DCGM_FI_DEV_GPU_TEMP > 90"))
    })
    .await
    .unwrap();
    wait_until("the dashboards to be relabelled", TIMEOUT, || async {
        let map = maps.get(DASHBOARDS[0]).await?;
        let labels = map.metadata.labels.unwrap_or_default();
        Ok((labels.get("grafana_dashboard").map(String::as_str) == Some("gpu")).then_some(()))
    })
    .await
    .unwrap();
}

/// An invalid threshold is refused by the API server, naming the key.
async fn an_invalid_threshold_is_refused(env: &Env, name: &str) {
    let error = env
        .policies()
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"dcgmExporter": {"prometheusRule": {"thresholds": {"temperatureCelsius": 500}}}}})),
        )
        .await
        .unwrap_err();
    assert!(error.to_string().contains("temperatureCelsius"), "{error}");
}

/// Disabled: both go away, and so does the warning.
async fn disabling_removes_both(env: &Env, name: &str, maps: &Api<ConfigMap>) {
    let off = [
        "dcgmExporter.prometheusRule.enabled=false",
        "dcgmExporter.grafanaDashboards.enabled=false",
    ];
    patch_spec(env, name, chart_spec(env, &off)).await;
    wait_until(
        "the rule and the dashboards to be removed",
        TIMEOUT,
        || async {
            let mut gone = rule(env).is_none();
            for dashboard in DASHBOARDS {
                gone &= maps.get_opt(dashboard).await?.is_none();
            }
            Ok(gone.then_some(()))
        },
    )
    .await
    .unwrap();
    let policy = wait_policy(
        env,
        name,
        "DCGMExporterReady without the rule warning",
        |p| {
            condition(p, operand::DCGM_EXPORTER_READY)
                .is_some_and(|c| !c.message.contains(RULE_CRD))
        },
    )
    .await;
    assert!(condition(&policy, operand::DCGM_EXPORTER_READY).is_some());
}
