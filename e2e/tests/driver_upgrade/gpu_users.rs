//! GPU users that request no GPU, on one node: a pod under the NVIDIA runtime class and a pod
//! holding a DRA claim on NVIDIA's driver are evicted with the GPU pods; a DaemonSet selecting
//! `nvidia.com/gpu.deploy.client` leaves while the upgrade pauses that label and comes back when
//! it is `true` again; a DaemonSet GPU user that does not select it holds the node, named in the
//! `DriverUpgrade` condition, until its DaemonSet selects the label.

use gpu_operator_harness::{access::kubectl_ok, wait_until};
use k8s_openapi::api::core::v1::Node;
use kube::{Api, ResourceExt};

use super::{LONG, support::Env, world::CLIENT};

/// The uid of the live pod `app=<app>` in `namespace` bound to `node`, once there is one.
async fn uid_on(env: &Env, namespace: &str, app: &str, node: &str) -> String {
    wait_until(&format!("a pod of {app} on {node}"), LONG, || async {
        Ok(super::support::live_pods(env, namespace, app)
            .await
            .iter()
            .find(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
            .and_then(ResourceExt::uid))
    })
    .await
    .unwrap()
}

async fn client_label(env: &Env, node: &str) -> Option<String> {
    let node = Api::<Node>::all(env.client.clone())
        .get(node)
        .await
        .unwrap();
    node.labels().get(CLIENT).cloned()
}

/// The GPU users' pods on the node before the upgrade.
pub struct Before {
    render: String,
    dra: String,
    profiler: String,
}

impl Before {
    /// Reads them once each runs on `node`; the node's client label is `true`.
    pub async fn read(env: &Env, namespace: &str, node: &str) -> Self {
        assert_eq!(client_label(env, node).await.as_deref(), Some("true"));
        Self {
            render: uid_on(env, namespace, "render", node).await,
            dra: uid_on(env, namespace, "infer-dra", node).await,
            profiler: uid_on(env, namespace, "profiler", node).await,
        }
    }

    /// After the upgrade of `node`: each was replaced, and the client label is `true` again.
    pub async fn were_moved(&self, env: &Env, namespace: &str, node: &str) {
        for (app, before, why) in [
            ("render", &self.render, "evicted: NVIDIA runtime class"),
            (
                "infer-dra",
                &self.dra,
                "evicted: DRA claim on gpu.nvidia.com",
            ),
            (
                "profiler",
                &self.profiler,
                "gone while the client label was paused",
            ),
        ] {
            let uid = wait_until(&format!("{app} back on {node}"), LONG, || async {
                let uid = uid_on(env, namespace, app, node).await;
                Ok((uid != *before).then_some(uid))
            })
            .await;
            assert!(uid.is_ok(), "{app} was not replaced ({why}) on {node}");
        }
        assert_eq!(
            client_label(env, node).await.as_deref(),
            Some("true"),
            "the client label was not restored on {node}"
        );
        let remain = kubectl_ok(&[
            "get",
            "events",
            "-n",
            "default",
            "--field-selector",
            &format!("involvedObject.name={node},reason=DriverUpgradeGpuUsersRemain"),
            "-o",
            "name",
        ])
        .unwrap();
        assert!(
            remain.trim().is_empty(),
            "the driver restarted while a GPU user remained on {node}: {remain}"
        );
    }
}

/// While `node` waits in pod deletion: its client label is paused.
pub async fn client_label_paused(env: &Env, node: &str) {
    wait_until("the client label paused", LONG, || async {
        Ok(
            (client_label(env, node).await.as_deref() == Some("paused-for-driver-upgrade"))
                .then_some(()),
        )
    })
    .await
    .unwrap();
}

/// Adds the client label to the nodeSelector of DaemonSet `app`, as its user does to follow
/// the condition's advice.
pub fn select_the_client_label(namespace: &str, app: &str) {
    kubectl_ok(&[
        "patch",
        "daemonset",
        app,
        "-n",
        namespace,
        "--type=merge",
        "-p",
        &serde_json::json!({"spec": {"template": {"spec": {"nodeSelector": {CLIENT: "true"}}}}})
            .to_string(),
    ])
    .unwrap();
}

/// The events `reason` about ClusterPolicy `policy`, their messages.
fn policy_events(policy: &str, reason: &str) -> Vec<String> {
    let out = kubectl_ok(&[
        "get",
        "events",
        "-n",
        "default",
        "--field-selector",
        &format!("involvedObject.name={policy},reason={reason}"),
        "-o",
        "jsonpath={range .items[*]}{.message}{\"\\n\"}{end}",
    ])
    .unwrap();
    out.lines().map(str::to_owned).collect()
}

/// `podDeletion.podSelector` matching no pod is said once on the policy (one Warning, however
/// many passes follow); one that matches a pod (its control) is not.
pub async fn an_unmatched_selector_is_said_once(env: &Env, policy: &str) {
    const REASON: &str = "GPUUserSelectorMatchesNothing";
    let set = |spec: serde_json::Value| async move {
        env.policies()
            .patch(
                policy,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(
                    &serde_json::json!({"spec": {"driver": {"upgradePolicy": spec}}}),
                ),
            )
            .await
            .unwrap();
    };
    set(serde_json::json!({"podDeletion": {"podSelector": "app=render"}})).await;
    set(serde_json::json!({"podDeletion": {"podSelector": "app=no-such-app"}})).await;
    wait_until("the unmatched selector said", LONG, || async {
        let said = policy_events(policy, REASON);
        Ok(said.iter().any(|m| m.contains("no-such-app")).then_some(()))
    })
    .await
    .unwrap();
    // More passes: a spec change wakes one, and the selector is not said again.
    set(serde_json::json!({"maxParallelUpgrades": 4})).await;
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let said = policy_events(policy, REASON);
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        !said[0].contains("app=render"),
        "a selector that matches a pod was reported: {said:?}"
    );
}
