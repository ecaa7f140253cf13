//! Waiting for the pods of the state NVIDIA's operator left (`gpu_operator_e2e::nvidia_fixture`),
//! watching them through the take-over, and the checks on what is left after it.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{Arc, Mutex},
};

use futures::StreamExt as _;
use gpu_operator_api::conditions::operand;
use gpu_operator_e2e::nvidia_fixture::{Fixture, NVIDIA_MANAGER};
use gpu_operator_harness::{node_marks::Marks, wait_until};
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, ResourceExt as _,
    api::{ApiResource, DynamicObject, ListParams},
    runtime::{WatchStreamExt as _, watcher},
};

use crate::support::{Env, TIMEOUT};

/// The operand conditions of the ClusterPolicy.
pub const OPERANDS: [&str; 9] = [
    operand::DEVICE_PLUGIN_READY,
    operand::VALIDATOR_READY,
    operand::DRIVER_READY,
    operand::TOOLKIT_READY,
    operand::DCGM_READY,
    operand::DCGM_EXPORTER_READY,
    operand::MIG_MANAGER_READY,
    operand::NODE_STATUS_EXPORTER_READY,
    operand::GFD_READY,
];

/// Waits until every DaemonSet of the fixture runs a Ready pod on each node it wants.
pub async fn wait_pods_running(env: &Env, fixture: &Fixture) {
    let names = fixture.daemonset_names();
    wait_until("NVIDIA's operand pods to run", TIMEOUT, || async {
        for name in &names {
            let ds = env.daemonsets().get(name).await?;
            let generation = ds.metadata.generation;
            let status = ds.status.unwrap_or_default();
            // A status the DaemonSet controller has not written yet reads 0 ready of 0 desired.
            if status.observed_generation < generation
                || status.number_ready != status.desired_number_scheduled
            {
                return Ok(None);
            }
        }
        Ok(Some(()))
    })
    .await
    .unwrap();
}

/// UIDs of the DaemonSets in the test namespace, by name.
pub async fn daemonset_uids(env: &Env) -> BTreeMap<String, String> {
    let list = env.daemonsets().list(&ListParams::default()).await.unwrap();
    list.items
        .iter()
        .map(|d| (d.name_any(), d.uid().unwrap()))
        .collect()
}

/// Waits until every DaemonSet has rolled its current template out (the driver, `OnDelete`,
/// only has a Ready pod on every node).
pub async fn wait_rolled_out(env: &Env) {
    wait_until("every operand rolled out", TIMEOUT, || async {
        let list = env.daemonsets().list(&ListParams::default()).await?;
        let done = list.items.iter().all(|ds| {
            let status = ds.status.clone().unwrap_or_default();
            let on_delete = ds
                .spec
                .as_ref()
                .and_then(|s| s.update_strategy.as_ref())
                .and_then(|u| u.type_.as_deref())
                == Some("OnDelete");
            status.observed_generation == ds.metadata.generation
                && status.number_ready == status.desired_number_scheduled
                && (on_delete
                    || status.updated_number_scheduled.unwrap_or_default()
                        == status.desired_number_scheduled)
        });
        Ok(done.then_some(()))
    })
    .await
    .unwrap();
}

/// Pod UIDs by (`app` label, node).
pub type Seen = BTreeMap<(String, String), BTreeSet<String>>;

/// Every pod UID seen, by (`app` label, node), from a watch started before the operator.
pub struct PodHistory {
    seen: Arc<Mutex<Seen>>,
    task: tokio::task::JoinHandle<()>,
}

impl PodHistory {
    pub fn watch(env: &Env) -> Self {
        let seen: Arc<Mutex<Seen>> = Arc::default();
        let pods: Api<Pod> = env.pods();
        let record = seen.clone();
        let task = tokio::spawn(async move {
            let mut stream = watcher(pods, watcher::Config::default())
                .default_backoff()
                .applied_objects()
                .boxed();
            while let Some(Ok(pod)) = stream.next().await {
                let app = pod.labels().get("app").cloned().unwrap_or_default();
                let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
                if let (Some(node), Some(uid)) = (node, pod.uid()) {
                    record
                        .lock()
                        .unwrap()
                        .entry((app, node))
                        .or_default()
                        .insert(uid);
                }
            }
        });
        Self { seen, task }
    }

    /// Waits until the watch has seen the pods `uids` (node → uid) of the driver.
    pub async fn wait_seen(&self, uids: &BTreeMap<String, String>) {
        wait_until("the pod watch to see the running pods", TIMEOUT, || async {
            let seen = self.seen.lock().unwrap();
            let all = seen.values().flatten().cloned().collect::<BTreeSet<_>>();
            Ok(uids.values().all(|u| all.contains(u)).then_some(()))
        })
        .await
        .unwrap();
    }

    pub fn stop(self) -> Seen {
        self.task.abort();
        self.seen.lock().unwrap().clone()
    }
}

/// Asserts that no operand had more than two pods on a node (NVIDIA's and ours) and the driver
/// one; returns how many (operand, node) pairs rolled.
pub fn assert_rolled_at_most_once(seen: &Seen, driver: &str) -> usize {
    let mut rolled = 0;
    for ((app, node), uids) in seen {
        let most = if app.starts_with(driver) { 1 } else { 2 };
        assert!(
            uids.len() <= most,
            "{app} on {node}: {} pods {uids:?}",
            uids.len()
        );
        rolled += usize::from(uids.len() == 2);
    }
    rolled
}

/// Asserts that every object loaded is either gone and named in `removed`, or still there with
/// only our field managers (besides status writers): nothing of NVIDIA's left in it.
pub async fn assert_adopted_or_removed(
    env: &Env,
    loaded: &[(ApiResource, String)],
    removed: &BTreeSet<String>,
) {
    for (resource, name) in loaded {
        let label = format!("{} {name}", resource.kind);
        let api = if resource.plural == "clusterroles"
            || resource.plural == "clusterrolebindings"
            || resource.plural == "runtimeclasses"
        {
            Api::<DynamicObject>::all_with(env.client.clone(), resource)
        } else {
            Api::<DynamicObject>::namespaced_with(env.client.clone(), &env.namespace, resource)
        };
        let live = api.get_opt(name).await.unwrap();
        match live {
            None => assert!(removed.contains(&label), "{label} is gone but not named"),
            Some(live) => {
                assert!(
                    !removed.contains(&label),
                    "{label} is named as removed but is there"
                );
                let managers: Vec<String> = live
                    .metadata
                    .managed_fields
                    .iter()
                    .flatten()
                    .filter(|e| e.subresource.is_none())
                    .filter_map(|e| e.manager.clone())
                    .collect();
                assert!(
                    managers.iter().any(|m| m.starts_with("gpu-operator/"))
                        && !managers.iter().any(|m| m == NVIDIA_MANAGER),
                    "{label} is not taken over: managers {managers:?}"
                );
            }
        }
    }
}

/// Asserts that every ConfigMap a DaemonSet mounts exists (none of NVIDIA's volumes survived the
/// take-over pointing at a ConfigMap that was removed).
pub async fn assert_mounted_config_maps_exist(env: &Env) {
    let config_maps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(env.client.clone(), &env.namespace);
    for ds in env
        .daemonsets()
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
    {
        let volumes = ds
            .spec
            .and_then(|s| s.template.spec)
            .and_then(|s| s.volumes)
            .unwrap_or_default();
        for cm in volumes.iter().filter_map(|v| v.config_map.as_ref()) {
            assert!(
                config_maps.get_opt(&cm.name).await.unwrap().is_some(),
                "{} mounts ConfigMap {}, which does not exist",
                ds.metadata.name.clone().unwrap_or_default(),
                cm.name
            );
        }
    }
}

/// Asserts that every node still has the labels NVIDIA's operator had written on it.
pub fn assert_marks_kept(
    nodes: &[k8s_openapi::api::core::v1::Node],
    marks: &BTreeMap<String, Marks>,
) {
    for node in nodes {
        for (key, value) in &marks[&node.name_any()].labels {
            assert_eq!(
                node.labels().get(key),
                Some(value),
                "{}: {key}",
                node.name_any()
            );
        }
    }
}
