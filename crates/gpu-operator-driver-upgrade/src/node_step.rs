//! One node's step in a pass: its pods listed (with their DRA claims) when its state evicts or
//! waits on them, the pure [`crate::plan::step`], then the work in order — evictions, driver
//! and validator pod deletions, the node's merge patch — and the Event, the log line and the
//! restart decision counted.

use gpu_operator_core::{Context, Error, report::metrics::DriverRestart};
use k8s_openapi::{api::core::v1::Pod, jiff::Timestamp};
use kube::{
    Api,
    api::{DeleteParams, Patch, Preconditions},
};

use crate::{
    actions::{evict, patch_json, pods_on, publish},
    facts::NodeFacts,
    plan::{self, POLL, StateLabel, Step, Wait},
    policy::Policy,
    state::UpgradeState,
};

/// Plans and carries out the step of one node.
pub(crate) async fn run_node(
    ctx: &Context,
    node: &NodeFacts,
    policy: &Policy,
    admitted: bool,
    now: Timestamp,
) -> Result<Step, Error> {
    let lists_pods = matches!(
        node.state,
        Some(
            UpgradeState::WaitForJobsRequired
                | UpgradeState::PodDeletionRequired
                | UpgradeState::DrainRequired
        )
    );
    let workloads = if lists_pods {
        let mut workloads = pods_on(ctx, &node.name).await?;
        crate::dra_claims::mark(ctx, &mut workloads).await?;
        workloads
    } else {
        Vec::new()
    };
    let mut step = plan::step(node, policy, admitted, &workloads, now);
    for (namespace, name) in &step.evict {
        if let Some(blocked) = evict(ctx, namespace, name).await? {
            step.wait = Some(Wait {
                reason: format!(
                    "{blocked}; {}",
                    step.wait
                        .as_ref()
                        .map(|w| w.reason.as_str())
                        .unwrap_or_default()
                ),
                recheck: Some(POLL * 2),
                stuck: true,
            });
        }
    }
    let operand_pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    for (name, uid) in &step.delete {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(uid.clone()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match operand_pods.delete(name, &params).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {}
            Err(e) => {
                return Err(Error::kube(format!(
                    "deleting pod {name} to upgrade node {}",
                    node.name
                ))(e));
            }
        }
    }
    if let Some(patch) = patch_json(&step) {
        let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(ctx.client.clone());
        nodes
            .patch(
                &node.name,
                &crate::actions::node_patch_params(),
                &Patch::Merge(&patch),
            )
            .await
            .map_err(Error::kube(format!(
                "moving node {} to its next driver upgrade state",
                node.name
            )))?;
        if let Some(event) = &step.event {
            publish(ctx, &node.name, event).await;
        }
        if let Some(decision) = restart_decision(node, &step) {
            tracing::info!(node = node.name, ?decision, "driver pod restart decided");
            ctx.metrics.count_driver_restart(decision);
        }
        tracing::info!(node = node.name, from = ?node.state, to = ?step.patch.state, "driver upgrade step");
    }
    Ok(step)
}

/// Why `step` begins restarting the driver pod of `node`, when it admits the node: a full
/// upgrade (cordoned next), or a restart in place (straight to the restart).
fn restart_decision(node: &NodeFacts, step: &Step) -> Option<DriverRestart> {
    if node.state != Some(UpgradeState::Required) {
        return None;
    }
    match step.patch.state {
        StateLabel::Set(UpgradeState::CordonRequired) => Some(DriverRestart::Upgrade),
        StateLabel::Set(UpgradeState::PodRestartRequired) => Some(DriverRestart::InPlace),
        _ => None,
    }
}
