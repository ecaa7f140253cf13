//! The `devicePlugin.config` step of the plugins' scenario: the ConfigMap a ClusterPolicy names is
//! checked before any operand mounts it. Missing or bad, it is reported (condition and Warning
//! Event naming the ConfigMap, key and field) and nothing changes on the nodes; good, its checked
//! copy is mounted by the device plugin, MPS daemon and GFD config managers, and an edit that
//! passes rolls them while one that fails leaves the last good copy in place.

use std::collections::BTreeMap;

use gpu_operator_api::conditions::operand;
use gpu_operator_harness::wait_until;
use k8s_openapi::api::{
    apps::v1::DaemonSet,
    core::v1::{ConfigMap, Event},
};
use kube::{
    Api,
    api::{ListParams, Patch, PatchParams, PostParams},
};
use serde_json::json;

use super::steps::{GFD, MPS, containers, daemonset, env_value, patch_policy};
use super::support::*;

/// The user's ConfigMap, as in NVIDIA's time-slicing guide.
const USER_CONFIG: &str = "time-slicing-config";
/// The device plugin's checked copy and GFD's.
const COPIES: [&str; 2] = [
    "nvidia-device-plugin-configs",
    "gpu-feature-discovery-configs",
];
const DIGEST: &str = "nvidia.com/device-plugin.config-digest";

fn time_slicing(replicas: u32) -> String {
    format!(
        "version: v1\nsharing:\n  timeSlicing:\n    resources:\n      - name: nvidia.com/gpu\n        replicas: {replicas}\n"
    )
}

fn digest(ds: &DaemonSet) -> Option<String> {
    let template = ds.spec.as_ref()?.template.metadata.as_ref()?;
    template.annotations.as_ref()?.get(DIGEST).cloned()
}

async fn copy_data(env: &Env, copy: &str) -> Option<BTreeMap<String, String>> {
    let config_maps: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.namespace);
    config_maps
        .get_opt(copy)
        .await
        .unwrap()
        .and_then(|c| c.data)
}

async fn write_user_config(env: &Env, any: &str) {
    let config_maps: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.namespace);
    let config: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": USER_CONFIG},
        "data": {"any": any, "tesla-t4": time_slicing(8)},
    }))
    .unwrap();
    if config_maps.get_opt(USER_CONFIG).await.unwrap().is_some() {
        config_maps
            .patch(USER_CONFIG, &PatchParams::default(), &Patch::Merge(&config))
            .await
            .unwrap();
    } else {
        config_maps
            .create(&PostParams::default(), &config)
            .await
            .unwrap();
    }
}

/// Waits for `DevicePluginReady` to be false for an invalid config whose message has `needles`,
/// and for the Warning Event that says the same.
async fn wait_refused(env: &Env, name: &str, needles: &[&str]) {
    wait_policy(env, name, "DevicePluginReady to refuse the config", |p| {
        condition(p, operand::DEVICE_PLUGIN_READY).is_some_and(|c| {
            c.status == "False"
                && c.reason == "InvalidConfig"
                && needles.iter().all(|n| c.message.contains(n))
        })
    })
    .await;
    let events: Api<Event> = Api::all(env.client.clone());
    wait_until("a Warning Event naming the config", TIMEOUT, || async {
        let list = events
            .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
            .await?;
        Ok(list.items.into_iter().find(|e| {
            e.reason.as_deref() == Some("InvalidConfig")
                && needles
                    .iter()
                    .all(|n| e.message.as_deref().unwrap_or_default().contains(n))
        }))
    })
    .await
    .unwrap();
}

/// The whole `devicePlugin.config` story, from a missing ConfigMap to a fixed edit.
pub async fn a_named_config_map_is_checked_then_copied(env: &Env, name: &str) {
    let config =
        json!({"spec": {"devicePlugin": {"config": {"name": USER_CONFIG, "default": "any"}}}});
    patch_policy(env, name, config).await;
    wait_refused(env, name, &[USER_CONFIG, "does not exist"]).await;
    let plugin = daemonset(env, PLUGIN).await;
    assert!(
        !containers(&plugin)
            .iter()
            .any(|c| c.name == "config-manager"),
        "nothing changes while the ConfigMap is missing"
    );

    write_user_config(env, &time_slicing(4)).await;
    wait_until("the config manager in the three", TIMEOUT, || async {
        for app in [PLUGIN, GFD, MPS] {
            let ds = daemonset(env, app).await;
            if !containers(&ds).iter().any(|c| c.name == "config-manager") || digest(&ds).is_none()
            {
                return Ok(None);
            }
        }
        Ok(Some(()))
    })
    .await
    .unwrap();
    let plugin = daemonset(env, PLUGIN).await;
    assert_eq!(env_value(&plugin, "DEFAULT_CONFIG").as_deref(), Some("any"));
    let pod = plugin.spec.clone().unwrap().template.spec.unwrap();
    assert_eq!(pod.share_process_namespace, Some(true));
    let mounted = pod
        .volumes
        .unwrap_or_default()
        .into_iter()
        .find(|v| v.name == "available-configs");
    assert_eq!(mounted.unwrap().config_map.unwrap().name, COPIES[0]);
    for copy in COPIES {
        let data = copy_data(env, copy).await.unwrap();
        assert_eq!(data["any"], time_slicing(4), "{copy}");
    }
    wait_policy(env, name, "the ClusterPolicy to be ready again", is_ready).await;
    let good = digest(&plugin);

    write_user_config(env, &time_slicing(1)).await;
    wait_refused(env, name, &[USER_CONFIG, "key \"any\"", "replicas"]).await;
    assert_eq!(
        digest(&daemonset(env, PLUGIN).await),
        good,
        "no roll on a bad edit"
    );
    for copy in COPIES {
        let data = copy_data(env, copy).await.unwrap();
        assert_eq!(
            data["any"],
            time_slicing(4),
            "{copy} keeps the last good config"
        );
    }

    write_user_config(env, &time_slicing(6)).await;
    wait_policy(env, name, "the ClusterPolicy to be ready again", is_ready).await;
    wait_until("the fixed config to roll the plugin", TIMEOUT, || async {
        let now = digest(&daemonset(env, PLUGIN).await);
        Ok((now != good).then_some(()))
    })
    .await
    .unwrap();
    assert_eq!(
        copy_data(env, COPIES[0]).await.unwrap()["any"],
        time_slicing(6)
    );
    wait_ds_ready(env, PLUGIN, None).await;
}
