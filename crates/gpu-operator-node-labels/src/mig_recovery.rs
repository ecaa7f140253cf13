//! What the MIG watchdog ([`crate::mig_watchdog`]) does beyond labels: its Events on the Node,
//! and the `retry` recovery, which deletes the node's MIG manager pod (its DaemonSet starts a new
//! one, which applies the layout again) unless a pod on the node uses its GPUs.

use gpu_operator_api::{ClusterPolicySpec, spec::MigRecovery};
use gpu_operator_core::Context;
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, ResourceExt as _,
    api::{DeleteParams, ListParams},
    runtime::events::{Event, EventType},
};

use crate::mig_watchdog::{self, Trouble};

/// Reason of the Event of a node stuck past the timeout.
pub const STUCK: &str = "MIGConfigStuck";
/// Reason of the Event of a retry.
pub const RETRIED: &str = "MIGConfigRetried";
/// Reason of the Event of a retry held back by GPU pods.
pub const RETRY_HELD: &str = "MIGRetryHeld";
/// Reason of the Event of restored GPU operands.
pub const CLIENTS_RESTORED: &str = "MIGClientsRestored";
/// The MIG manager pods' `app` label.
const MIG_MANAGER_APP: &str = "app=nvidia-mig-manager";
/// The resource prefix of NVIDIA's devices (GPUs, MIG devices, shared GPUs).
const NVIDIA_RESOURCE: &str = "nvidia.com/";

/// Says and does what `trouble` on `node` calls for under `policy`.
pub async fn act(ctx: &Context, policy: &ClusterPolicySpec, node: &str, trouble: &Trouble) {
    let said = mig_watchdog::describe(node, trouble);
    if trouble.new && trouble.stuck() {
        tracing::warn!(node, state = %trouble.state, layout = %trouble.layout, "{said}");
        publish(ctx, node, EventType::Warning, STUCK, said.clone()).await;
    }
    if !trouble.recover {
        return;
    }
    match mig_watchdog::recovery(policy) {
        MigRecovery::Report => {}
        MigRecovery::RestoreClients => {
            let message = format!(
                "{said}; migManager.watchdog.recovery=restoreClients: its paused GPU operands are \
                 set back to true, so it offers its GPUs as they are"
            );
            tracing::info!(node, "{message}");
            publish(ctx, node, EventType::Normal, CLIENTS_RESTORED, message).await;
        }
        MigRecovery::Retry => retry(ctx, node, &said).await,
    }
}

/// Restarts `node`'s MIG manager unless a pod there uses the GPUs.
async fn retry(ctx: &Context, node: &str, said: &str) {
    let on_node = ListParams::default().fields(&format!("spec.nodeName={node}"));
    let pods = match Api::<Pod>::all(ctx.client.clone()).list(&on_node).await {
        Ok(pods) => pods.items,
        Err(error) => {
            tracing::warn!(node, %error, "MIG watchdog: cannot list the node's pods; not retrying");
            return;
        }
    };
    let users: Vec<String> = pods
        .iter()
        .filter(|p| uses_gpus(p))
        .map(|p| format!("{}/{}", p.namespace().unwrap_or_default(), p.name_any()))
        .collect();
    if !users.is_empty() {
        let message = format!(
            "{said}; not retried (migManager.watchdog.recovery=retry) while pods use its GPUs: {}; \
             move them, then delete the node's nvidia-mig-manager pod to retry",
            users.join(", ")
        );
        tracing::warn!(node, "{message}");
        publish(ctx, node, EventType::Warning, RETRY_HELD, message).await;
        return;
    }
    // Listed, then deleted one by one: the operator's Role grants `delete`, not `deletecollection`.
    let managers = Api::<Pod>::namespaced(ctx.client.clone(), &ctx.namespace);
    let found = match managers.list(&on_node.labels(MIG_MANAGER_APP)).await {
        Ok(list) => list.items,
        Err(error) => {
            tracing::warn!(node, %error, "MIG watchdog: cannot find the node's MIG manager");
            return;
        }
    };
    let mut deleted = 0;
    for pod in &found {
        match managers
            .delete(&pod.name_any(), &DeleteParams::default())
            .await
        {
            Ok(_) => deleted += 1,
            Err(error) => {
                tracing::warn!(node, pod = %pod.name_any(), %error, "MIG watchdog: cannot restart the node's MIG manager");
            }
        }
    }
    if deleted == 0 {
        return;
    }
    let message = format!(
        "{said}; retrying (migManager.watchdog.recovery=retry): restarted the node's MIG manager \
         ({deleted} pod(s) deleted), which applies the layout again"
    );
    tracing::info!(node, "{message}");
    publish(ctx, node, EventType::Normal, RETRIED, message).await;
}

/// Whether `pod` holds the node's GPUs: it runs (or may) and requests an NVIDIA device.
pub fn uses_gpus(pod: &Pod) -> bool {
    let finished = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|p| p == "Succeeded" || p == "Failed");
    let Some(spec) = &pod.spec else {
        return false;
    };
    !finished
        && spec
            .containers
            .iter()
            .chain(spec.init_containers.iter().flatten())
            .filter_map(|c| c.resources.as_ref())
            .flat_map(|r| {
                r.requests
                    .iter()
                    .chain(r.limits.iter())
                    .flat_map(|m| m.keys())
            })
            .any(|k| k.starts_with(NVIDIA_RESOURCE))
}

async fn publish(ctx: &Context, node: &str, type_: EventType, reason: &str, message: String) {
    let event = Event {
        type_,
        reason: reason.to_owned(),
        note: Some(message),
        action: "WatchMIGReconfiguration".to_owned(),
        secondary: None,
    };
    ctx.one_off_events.publish_on_node(node, &event).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(resources: &serde_json::Value, phase: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"containers": [{"name": "c", "resources": resources}]},
            "status": {"phase": phase},
        }))
        .unwrap()
    }

    #[test]
    fn gpu_users_request_an_nvidia_device_and_run() {
        assert!(uses_gpus(&pod(
            &serde_json::json!({"limits": {"nvidia.com/gpu": "1"}}),
            "Running"
        )));
        assert!(uses_gpus(&pod(
            &serde_json::json!({"requests": {"nvidia.com/mig-1g.10gb": "1"}}),
            "Pending"
        )));
        assert!(!uses_gpus(&pod(
            &serde_json::json!({"limits": {"nvidia.com/gpu": "1"}}),
            "Succeeded"
        )));
        assert!(!uses_gpus(&pod(
            &serde_json::json!({"limits": {"cpu": "1"}}),
            "Running"
        )));
    }
}
