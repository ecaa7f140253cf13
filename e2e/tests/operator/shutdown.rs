//! SIGTERM while the operator waits on the API server: two admission webhooks that never answer
//! (the API server waits out their timeout) hold a DaemonSet write and a ClusterPolicy status
//! write in flight, and the process must still end within [`SHUTDOWN_BOUND`], handing its Lease
//! back.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use gpu_operator_harness::{operator::Operator, wait_until};
use gpu_operator_process::leader::DEFAULT_LEASE_NAME;
use k8s_openapi::api::{
    admissionregistration::v1::ValidatingWebhookConfiguration, coordination::v1::Lease,
};
use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams, PostParams},
};
use serde_json::json;
use tokio::net::TcpListener;

use super::support::*;

/// How long the API server waits for a webhook that never answers: far past the bound.
const WEBHOOK_TIMEOUT_S: u64 = 25;

/// A TLS endpoint that accepts connections and never says a word; counts the connections.
async fn silent_endpoint() -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = seen.clone();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            held.push(stream);
        }
    });
    (port, seen)
}

/// A webhook on `resource` (group `group`) of the scenario's objects, sent to `port`.
fn webhook(env: &Env, name: &str, group: &str, resource: &str, port: u16) -> serde_json::Value {
    let scope = if resource.starts_with("clusterpolicies") {
        json!({ "objectSelector": {} })
    } else {
        json!({ "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": env.namespace}} })
    };
    let mut hook = json!({
        "name": format!("{name}.e2e.gpu-operator.test"),
        "clientConfig": {"url": format!("https://127.0.0.1:{port}/")},
        "rules": [{
            "apiGroups": [group], "apiVersions": ["*"],
            "operations": ["CREATE", "UPDATE"], "resources": [resource],
        }],
        "failurePolicy": "Ignore",
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": WEBHOOK_TIMEOUT_S,
    });
    if let (Some(hook), Some(scope)) = (hook.as_object_mut(), scope.as_object()) {
        hook.extend(scope.clone());
    }
    hook
}

/// Holds a DaemonSet write and a status write of `name` on silent webhooks, sends SIGTERM, and
/// checks the exit time and the released Lease; then starts the operator again, converged.
pub async fn sigterm_while_writes_wait_on_the_api_server(
    env: &Env,
    name: &str,
    operator: Operator,
) -> Operator {
    let (ds_port, ds_seen) = silent_endpoint().await;
    let (status_port, status_seen) = silent_endpoint().await;
    let config_name = format!("{name}-stall");
    let config: ValidatingWebhookConfiguration = serde_json::from_value(json!({
        "metadata": {"name": config_name},
        "webhooks": [
            webhook(env, "daemonsets", "apps", "daemonsets", ds_port),
            webhook(env, "status", "nvidia.com", "clusterpolicies/status", status_port),
        ],
    }))
    .unwrap();
    let configs: Api<ValidatingWebhookConfiguration> = Api::all(env.client.clone());
    configs
        .create(&PostParams::default(), &config)
        .await
        .unwrap();
    // A spec change the device plugin's DaemonSet carries, and every operand acknowledges.
    env.policies()
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(
                &json!({"spec": {"devicePlugin": {"env": [{"name": "E2E_STALL", "value": "1"}]}}}),
            ),
        )
        .await
        .unwrap();
    // The positive control: both writes are waiting on the API server (which waits on us).
    let waiting = wait_until("a DaemonSet and a status write held", TIMEOUT, || async {
        let both = ds_seen.load(Ordering::SeqCst) > 0 && status_seen.load(Ordering::SeqCst) > 0;
        Ok(both.then_some(()))
    })
    .await;
    if let Err(e) = waiting {
        let _ = configs.delete(&config_name, &DeleteParams::default()).await;
        panic!("{e}\n{}", operator.log_tail());
    }
    let took = operator.stop().unwrap();
    configs
        .delete(&config_name, &DeleteParams::default())
        .await
        .unwrap();
    assert!(
        took < SHUTDOWN_BOUND,
        "SIGTERM with writes held by the API server: the operator took {took:?} to exit (bound \
         {SHUTDOWN_BOUND:?})"
    );
    let leases: Api<Lease> = Api::namespaced(env.client.clone(), &env.namespace);
    let holder = leases
        .get(DEFAULT_LEASE_NAME)
        .await
        .unwrap()
        .spec
        .and_then(|s| s.holder_identity);
    assert_eq!(holder, None, "the Lease was not handed back");

    let operator = env.start(&IMAGES);
    wait_until(
        "the restarted operator to apply the change",
        TIMEOUT,
        || async {
            let plugin = env.daemonsets().get(PLUGIN).await.unwrap();
            let carried = serde_json::to_string(&plugin.spec)
                .unwrap()
                .contains("E2E_STALL");
            Ok((carried && is_ready(&env.policies().get(name).await.unwrap())).then_some(()))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", operator.log_tail()));
    wait_settled(env, name, Duration::from_secs(5)).await;
    operator
}
