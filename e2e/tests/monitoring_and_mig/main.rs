//! DCGM, the DCGM exporter and the MIG manager end to end, with the operator as a host process:
//! DCGM's node-local Service; the exporter's ServiceMonitor created exactly while its CRD exists
//! (and reported while it does not); the exporter switched off and on; the MIG manager only on
//! MIG-capable nodes with its ConfigMaps; a seeded MIG layout the defaults lack reported by name;
//! a user's layouts ConfigMap refused while mig-parted would reject it, then mounted as a copy; a
//! MIG layout that failed on a node (a stand-in writes the labels as NVIDIA's MIG manager does)
//! named until it applies.
#![cfg(feature = "e2e")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::large_futures
)]

use gpu_operator_e2e::scenario as support;
mod mig_watchdog;
use mig_watchdog::{
    a_failed_mig_layout_is_reported_until_it_applies,
    a_stuck_or_failed_layout_is_recovered_as_the_policy_says,
};

use gpu_operator_api::{ClusterPolicy, ClusterPolicySpec, conditions::operand, labels};
use gpu_operator_harness::{
    access::kubectl_ok,
    crd::{
        SERVICE_MONITOR_CRD as SM_CRD, SERVICE_MONITOR_CRD_YAML as SM_CRD_YAML,
        ServiceMonitorCrdCleanup as CrdCleanup,
    },
    unique_name, wait_until,
};
use k8s_openapi::api::core::v1::{ConfigMap, Event, Service};
use kube::{
    Api, ResourceExt as _,
    api::{ListParams, Patch, PatchParams, PostParams},
};
use serde_json::json;

use support::{
    Cleanup, Env, IMAGES, TIMEOUT, condition, pods_of, setup, simulated_nodes, wait_ds_ready,
    wait_policy,
};

const DCGM: &str = "nvidia-dcgm";
const EXPORTER: &str = "nvidia-dcgm-exporter";
const MIG_MANAGER: &str = "nvidia-mig-manager";
#[tokio::test]
async fn monitoring_and_mig_operands_follow_the_cluster_policy() {
    let env = setup().await;
    let _ = kubectl_ok(&["delete", "crd", SM_CRD, "--ignore-not-found"]);
    let operator = env.start(&IMAGES);
    let name = unique_name("cluster-policy");
    let _cleanup = Cleanup {
        namespace: env.namespace.clone(),
        policies: vec![name.clone()],
    };
    let _crd = CrdCleanup;
    let mut spec = ClusterPolicySpec::default();
    spec.dcgm.enabled = Some(true);
    spec.dcgm_exporter.service_monitor = Some(gpu_operator_api::spec::ServiceMonitorConfig {
        enabled: Some(true),
        interval: Some("15s".into()),
        ..Default::default()
    });
    env.policies()
        .create(&PostParams::default(), &ClusterPolicy::new(&name, spec))
        .await
        .unwrap();

    dcgm_is_node_local(&env).await;
    mig_manager_runs_only_on_mig_capable_nodes(&env).await;
    a_missing_service_monitor_crd_is_reported(&env, &name).await;
    the_service_monitor_follows_its_crd(&env, &name).await;
    the_exporter_toggles(&env, &name).await;
    a_seeded_layout_the_defaults_lack_is_reported(&env, &name).await;
    a_users_layouts_are_checked_before_they_are_mounted(&env, &name).await;
    a_failed_mig_layout_is_reported_until_it_applies(&env, &name, &operator).await;
    a_stuck_or_failed_layout_is_recovered_as_the_policy_says(&env, &name).await;
    operator.stop().unwrap();
}

/// `dcgm.enabled: true`: the host engine on every GPU node behind a node-local Service.
async fn dcgm_is_node_local(env: &Env) {
    wait_ds_ready(env, DCGM, None).await;
    let service = services(env).get(DCGM).await.unwrap().spec.unwrap();
    assert_eq!(service.internal_traffic_policy.as_deref(), Some("Local"));
    assert_eq!(service.ports.unwrap()[0].port, 5555);
    wait_ds_ready(env, EXPORTER, None).await;
    let exporter = env.daemonsets().get(EXPORTER).await.unwrap();
    let container = &exporter.spec.unwrap().template.spec.unwrap().containers[0];
    let remote = container
        .env
        .as_ref()
        .unwrap()
        .iter()
        .find(|e| e.name == "DCGM_REMOTE_HOSTENGINE_INFO");
    assert_eq!(remote.unwrap().value.as_deref(), Some("nvidia-dcgm:5555"));
    let port = &services(env)
        .get(EXPORTER)
        .await
        .unwrap()
        .spec
        .unwrap()
        .ports
        .unwrap()[0];
    assert_eq!(
        (port.name.as_deref(), port.port),
        (Some("gpu-metrics"), 9400)
    );
}

/// The MIG manager has a pod on exactly the MIG-capable GPU nodes, and its default ConfigMaps.
async fn mig_manager_runs_only_on_mig_capable_nodes(env: &Env) {
    wait_ds_ready(env, MIG_MANAGER, None).await;
    let nodes = simulated_nodes(&env.client).await;
    let capable: Vec<String> = nodes
        .iter()
        .filter(|n| {
            n.labels()
                .get(labels::MIG_CAPABLE)
                .is_some_and(|v| v == "true")
        })
        .map(kube::ResourceExt::name_any)
        .collect();
    assert!(!capable.is_empty(), "the fleet has MIG-capable nodes");
    let pods = pods_of(env, MIG_MANAGER).await;
    let mut with_pods: Vec<String> = pods
        .keys()
        .filter(|n| nodes.iter().any(|s| &s.name_any() == *n))
        .cloned()
        .collect();
    with_pods.sort();
    let mut expected = capable.clone();
    expected.sort();
    assert_eq!(
        with_pods, expected,
        "MIG manager pods on exactly the MIG-capable nodes"
    );
    let maps: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.namespace);
    let layouts = maps.get("default-mig-parted-config").await.unwrap();
    let config = &layouts.data.unwrap()["config.yaml"];
    assert!(
        gpu_operator_mig_manager::layouts(config)
            .unwrap()
            .contains("all-1g.10gb")
    );
    assert!(
        maps.get("default-gpu-clients")
            .await
            .unwrap()
            .data
            .unwrap()
            .contains_key("clients.yaml")
    );
}

/// With `serviceMonitor.enabled` and no CRD: no ServiceMonitor, and the condition says so (no
/// Warning Event: the setting is on in NVIDIA's default values, so a default install on a cluster
/// without the Prometheus Operator would draw one nobody caused; the chart e2e checks none comes).
async fn a_missing_service_monitor_crd_is_reported(env: &Env, name: &str) {
    let policy = wait_policy(
        env,
        name,
        "DCGMExporterReady to report the missing CRD",
        |p| {
            condition(p, operand::DCGM_EXPORTER_READY)
                .is_some_and(|c| c.reason == "ServiceMonitorCRDMissing")
        },
    )
    .await;
    let message = &condition(&policy, operand::DCGM_EXPORTER_READY)
        .unwrap()
        .message;
    assert!(message.contains(SM_CRD), "{message}");
}

/// Installing the CRD creates the ServiceMonitor; removing it leaves the warning again.
async fn the_service_monitor_follows_its_crd(env: &Env, name: &str) {
    let file = env.dir.join("servicemonitor-crd.yaml");
    std::fs::write(&file, SM_CRD_YAML).unwrap();
    kubectl_ok(&["apply", "-f", file.to_str().unwrap()]).unwrap();
    wait_service_monitor(env, true).await;
    let json = kubectl_ok(&[
        "get",
        "servicemonitor",
        EXPORTER,
        "-n",
        &env.namespace,
        "-o",
        "json",
    ])
    .unwrap();
    let monitor: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(monitor["spec"]["endpoints"][0]["port"], "gpu-metrics");
    assert_eq!(monitor["spec"]["endpoints"][0]["interval"], "15s");
    wait_policy(env, name, "DCGMExporterReady without the warning", |p| {
        condition(p, operand::DCGM_EXPORTER_READY).is_some_and(|c| c.reason == "Ready")
    })
    .await;
    kubectl_ok(&["delete", "crd", SM_CRD]).unwrap();
    wait_policy(env, name, "DCGMExporterReady to report the CRD gone", |p| {
        condition(p, operand::DCGM_EXPORTER_READY)
            .is_some_and(|c| c.reason == "ServiceMonitorCRDMissing")
    })
    .await;
}

/// `dcgmExporter.enabled: false` deletes its DaemonSet and Service; `true` brings them back.
async fn the_exporter_toggles(env: &Env, name: &str) {
    let toggle = |enabled: bool| json!({"spec": {"dcgmExporter": {"enabled": enabled}}});
    env.policies()
        .patch(name, &PatchParams::default(), &Patch::Merge(&toggle(false)))
        .await
        .unwrap();
    wait_until("the exporter to be removed", TIMEOUT, || async {
        let gone = env.daemonsets().get_opt(EXPORTER).await?.is_none()
            && services(env).get_opt(EXPORTER).await?.is_none();
        Ok(gone.then_some(()))
    })
    .await
    .unwrap();
    env.policies()
        .patch(name, &PatchParams::default(), &Patch::Merge(&toggle(true)))
        .await
        .unwrap();
    wait_ds_ready(env, EXPORTER, None).await;
    assert!(services(env).get_opt(EXPORTER).await.unwrap().is_some());
}

/// `migManager.config.default` naming a layout the default ConfigMap lacks: condition + Event.
async fn a_seeded_layout_the_defaults_lack_is_reported(env: &Env, name: &str) {
    // The nodes already carry a `nvidia.com/mig.config` label, so nothing is seeded with it.
    let patch = json!({"spec": {"migManager": {"config": {"default": "all-9g.99gb"}}}});
    env.policies()
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let policy = wait_policy(
        env,
        name,
        "MIGManagerReady to report the missing layout",
        |p| {
            condition(p, operand::MIG_MANAGER_READY)
                .is_some_and(|c| c.reason == "MIGConfigNotFound")
        },
    )
    .await;
    let message = &condition(&policy, operand::MIG_MANAGER_READY)
        .unwrap()
        .message;
    assert!(
        message.contains("all-9g.99gb") && message.contains("default-mig-parted-config"),
        "{message}"
    );
    warning_event(env, name, "MIGConfigNotFound", "all-9g.99gb").await;
    let restore = json!({"spec": {"migManager": {"config": {"default": "all-disabled"}}}});
    env.policies()
        .patch(name, &PatchParams::default(), &Patch::Merge(&restore))
        .await
        .unwrap();
}

/// `migManager.config.name`: a ConfigMap mig-parted would reject is refused (condition, Event,
/// the manager keeps the default layouts); fixed, its checked copy is what the manager mounts.
async fn a_users_layouts_are_checked_before_they_are_mounted(env: &Env, name: &str) {
    const USER: &str = "my-mig-layouts";
    let maps: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.namespace);
    let layouts = |version: &str| {
        let text = format!(
            "version: {version}\nmig-configs:\n  all-disabled:\n    - devices: all\n      mig-enabled: false\n"
        );
        serde_json::from_value::<ConfigMap>(json!({
            "metadata": {"name": USER}, "data": {"config.yaml": text}
        }))
        .unwrap()
    };
    maps.create(&PostParams::default(), &layouts("v2"))
        .await
        .unwrap();
    let patch =
        json!({"spec": {"migManager": {"config": {"name": USER, "default": "all-disabled"}}}});
    env.policies()
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let policy = wait_policy(env, name, "MIGManagerReady to refuse the layouts", |p| {
        condition(p, operand::MIG_MANAGER_READY).is_some_and(|c| c.reason == "InvalidConfig")
    })
    .await;
    let message = &condition(&policy, operand::MIG_MANAGER_READY)
        .unwrap()
        .message;
    assert!(
        message.contains(USER) && message.contains("config.yaml") && message.contains("v2"),
        "{message}"
    );
    warning_event(env, name, "InvalidConfig", USER).await;
    let mounted = || async {
        let ds = env.daemonsets().get(MIG_MANAGER).await.unwrap();
        let volumes = ds.spec.unwrap().template.spec.unwrap().volumes.unwrap();
        let layouts = volumes.into_iter().find(|v| v.name == "mig-parted-config");
        layouts.unwrap().config_map.unwrap().name
    };
    assert_eq!(mounted().await, "default-mig-parted-config");

    maps.replace(USER, &PostParams::default(), &layouts("v1"))
        .await
        .unwrap();
    wait_until("the manager to mount the checked copy", TIMEOUT, || async {
        Ok((mounted().await == "nvidia-mig-manager-custom-config").then_some(()))
    })
    .await
    .unwrap();
    let copy = maps.get("nvidia-mig-manager-custom-config").await.unwrap();
    assert!(copy.data.unwrap()["config.yaml"].starts_with("version: v1"));
    wait_policy(env, name, "MIGManagerReady to accept the layouts", |p| {
        condition(p, operand::MIG_MANAGER_READY).is_some_and(|c| c.reason != "InvalidConfig")
    })
    .await;
}

fn services(env: &Env) -> Api<Service> {
    Api::namespaced(env.client.clone(), &env.namespace)
}

async fn wait_service_monitor(env: &Env, present: bool) {
    wait_until("the exporter's ServiceMonitor", TIMEOUT, || async {
        let found = kubectl_ok(&["get", "servicemonitor", EXPORTER, "-n", &env.namespace]).is_ok();
        Ok((found == present).then_some(()))
    })
    .await
    .unwrap();
}

pub(crate) async fn warning_event(env: &Env, policy: &str, reason: &str, mentions: &str) {
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
    assert!(event.message.unwrap_or_default().contains(mentions));
}
