//! GPU users that request no GPU: a pod under the NVIDIA runtime class is evicted with the GPU
//! pods, and a DaemonSet GPU user, which eviction cannot move, is named in a Warning Event (the
//! operator's own pods are not).

use gpu_operator_harness::{access::kubectl_ok, wait_until};
use k8s_openapi::api::core::v1::Pod;
use kube::{Api, ResourceExt, api::ListParams};

use super::{LONG, support::Env};

/// The uid of the live pod `app=<app>` in `namespace`, once there is one.
pub async fn uid_of(env: &Env, namespace: &str, app: &str) -> String {
    let api: Api<Pod> = Api::namespaced(env.client.clone(), namespace);
    wait_until(&format!("a pod of {app}"), LONG, || async {
        let pods = api
            .list(&ListParams::default().labels(&format!("app={app}")))
            .await
            .unwrap();
        Ok(pods
            .items
            .iter()
            .find(|p| p.metadata.deletion_timestamp.is_none())
            .and_then(ResourceExt::uid))
    })
    .await
    .unwrap()
}

/// After the upgrade of `node`: the runtime-class pod of `render` is a new one (it was evicted),
/// and the node's Warning Event names the DaemonSet pod of `exporter`.
pub async fn were_found(
    env: &Env,
    namespace: &str,
    node: &str,
    render: (&str, &str),
    exporter: &str,
) {
    let (app, before) = render;
    assert_ne!(
        uid_of(env, namespace, app).await,
        before,
        "the pod under the NVIDIA runtime class was not evicted from {node}"
    );
    let notes = kubectl_ok(&[
        "get",
        "events",
        "-n",
        "default",
        "--field-selector",
        &format!("involvedObject.name={node},reason=DriverUpgradeGpuUsersRemain"),
        "-o",
        "jsonpath={.items[*].message}",
    ])
    .unwrap();
    assert!(
        notes.contains(&format!("{namespace}/{exporter}-"))
            && notes.contains("runtime class nvidia"),
        "no Warning Event naming the DaemonSet GPU user on {node}: {notes:?}"
    );
    assert!(
        !notes.contains(&format!("{}/", env.namespace)),
        "the operator's own pods are the driver manager's to move, not GPU users: {notes:?}"
    );
}
