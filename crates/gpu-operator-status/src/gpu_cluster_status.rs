//! The GPUCluster's overall status, NVIDIA's contract: `state` (`ready`, `notReady`,
//! `disabled`), `namespace` and the paired `Ready`/`Error` conditions, summed up ([`summarize`],
//! pure) from the conditions of the GPUCluster's operands (`DRADriverReady`,
//! `DRAValidatorReady`, … as the binary lists them) and written like the ClusterPolicy's
//! ([`crate::overall::write`]). Ours beside NVIDIA's: `observedGeneration`, the generation every
//! operand condition acknowledged. The reconcile also keeps what NVIDIA's GPUCluster controller
//! keeps while the GPUCluster is active: its finalizer
//! ([`crate::gpu_cluster_teardown::ensure_finalizer`]) and the namespace's admin-access label
//! ([`crate::admin_access`]); once it is being deleted, it runs the ordered teardown
//! ([`crate::gpu_cluster_teardown`]) instead.

use std::{
    sync::{Arc, Weak},
    time::{Duration, Instant},
};

use gpu_operator_api::{
    GpuCluster,
    conditions::{self as names, reason},
    gpu_cluster::GpuClusterState,
};
use gpu_operator_core::{
    Context, Error,
    pipeline::status_batch::{Outgoing, Summarizer},
    report::conditions::Desired,
};
use kube::runtime::controller::Action;

use crate::{
    admin_access, gpu_cluster_teardown,
    overall::{self, Overall},
};

/// Name of this reconciler (metric label).
pub const NAME: &str = "gpu-cluster-status";

/// Reasons of operand conditions that mean "still rolling out" rather than "failed".
const PROGRESS_REASONS: [&str; 2] = ["NotReady", "RollingOut"];
/// Reason of an operand condition that deploys nothing.
const DISABLED_REASON: &str = "Disabled";

/// What a GPUCluster's overall status should say, and the generation it is of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    /// `state`, `Ready` and `Error`.
    pub overall: Overall,
    /// `observedGeneration`: the oldest generation the operand conditions acknowledged (none
    /// while one is missing).
    pub observed_generation: Option<i64>,
}

/// Sums up `cr`'s `operands` conditions: ready when every one is `True` at the current
/// generation, `disabled` when every one is `True` for `Disabled`, not ready otherwise, naming
/// the operands that wait or failed. Pure.
pub fn summarize(cr: &GpuCluster, operands: &[&str]) -> Summary {
    let generation = cr.metadata.generation;
    let live = cr
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    let mut failed = Vec::new();
    let mut waiting = Vec::new();
    let mut lagging = 0;
    let mut disabled = 0;
    let mut observed: Option<Option<i64>> = None;
    for operand in operands {
        let found = live.iter().find(|c| c.type_ == *operand);
        let acknowledged = found.and_then(|c| c.observed_generation);
        observed = Some(match observed {
            None => acknowledged,
            Some(oldest) => oldest.zip(acknowledged).map(|(a, b)| a.min(b)),
        });
        match found {
            Some(c) if c.observed_generation != generation => {
                lagging += 1;
                waiting.push(format!("{operand} (not yet reconciled)"));
            }
            Some(c) if c.status == "True" => {
                disabled += usize::from(c.reason == DISABLED_REASON);
            }
            // By reason only, as the ClusterPolicy's: the counts are in the operand's condition.
            Some(c) if PROGRESS_REASONS.contains(&c.reason.as_str()) => {
                waiting.push(format!("{operand} ({})", c.reason));
            }
            Some(c) => failed.push(format!("{operand}: {}", c.message)),
            None => waiting.push(format!("{operand} (not yet reconciled)")),
        }
    }
    let observed_generation = observed.flatten();
    let (state, ready, catching_up) = if !failed.is_empty() {
        let message = format!("Failed to reconcile: {}", failed.join("; "));
        let ready = Desired::not_ok(names::READY, reason::RECONCILE_FAILED, message);
        (GpuClusterState::NotReady, ready, false)
    } else if !waiting.is_empty() {
        let message = format!(
            "GPUCluster is not ready; components not ready: {}",
            waiting.join("; ")
        );
        let ready = Desired::not_ok(names::READY, reason::OPERAND_NOT_READY, message);
        (GpuClusterState::NotReady, ready, lagging == waiting.len())
    } else if !operands.is_empty() && disabled == operands.len() {
        let message = "GPUCluster deploys nothing: every component is disabled".to_owned();
        let ready = Desired::not_ok(names::READY, reason::RECONCILED, message);
        (GpuClusterState::Disabled, ready, false)
    } else {
        let message = format!(
            "GPUCluster is ready: every component is ready ({})",
            operands.join(", ")
        );
        let ready = Desired::ok(names::READY, reason::RECONCILED, message);
        (GpuClusterState::Ready, ready, false)
    };
    Summary {
        overall: Overall {
            state: state.as_str(),
            ready: overall::ready_condition(&ready),
            error: overall::error_condition(&ready),
            catching_up,
        },
        observed_generation,
    }
}

/// Reconciles `cr`: its teardown when it is being deleted; else its finalizer, the namespace
/// label and its overall status.
pub async fn reconcile(
    cr: Arc<GpuCluster>,
    ctx: Arc<Context>,
    operands: &[&str],
) -> Result<Action, Error> {
    let started = Instant::now();
    let result = if cr.metadata.deletion_timestamp.is_some() {
        gpu_cluster_teardown::reconcile(&ctx, &cr).await
    } else {
        active(&ctx, &cr, operands).await
    };
    ctx.metrics.observe(
        NAME,
        started.elapsed(),
        result.as_ref().err().map(Error::category),
    );
    result
}

/// The reconcile of a GPUCluster that is not being deleted. The finalizer and the label come
/// first (NVIDIA's order); a refusal is retried and does not hold the status back.
async fn active(ctx: &Context, cr: &GpuCluster, operands: &[&str]) -> Result<Action, Error> {
    let kept = match gpu_cluster_teardown::ensure_finalizer(ctx, cr).await {
        Ok(()) => admin_access::reconcile(ctx).await,
        Err(error) => Err(error),
    };
    let summary = summarize(cr, operands);
    let wanted = overall::namespaced_fields(Some(&ctx.namespace), summary.observed_generation);
    let live = cr.status.as_ref().map_or_else(serde_json::Map::new, |s| {
        overall::namespaced_fields(s.namespace.as_deref(), s.observed_generation)
    });
    let deferred = overall::write(
        ctx,
        cr,
        &summary.overall,
        wanted.clone(),
        overall::fields_current(&live, &wanted),
    );
    kept.map(|()| Action::requeue(deferred.unwrap_or(Duration::from_secs(3600))))
}

/// The GPUCluster's overall status found for each status request of its operands' conditions
/// (see [`Summarizer`]); none for one being deleted, whose status the teardown writes.
pub fn summarizer(ctx: Weak<Context>, operands: &'static [&'static str]) -> Summarizer<GpuCluster> {
    Arc::new(move |cr: &GpuCluster, outgoing: Outgoing<'_>| {
        let ctx = ctx.upgrade()?;
        if cr.metadata.deletion_timestamp.is_some() {
            return None;
        }
        let mut cr = cr.clone();
        let status = cr.status.get_or_insert_with(Default::default);
        status.conditions = Some(outgoing.conditions.to_vec());
        let summary = summarize(&cr, operands);
        let wanted = overall::namespaced_fields(Some(&ctx.namespace), summary.observed_generation);
        let live = overall::Live {
            conditions: outgoing.conditions,
            state: outgoing.fields.get("state").and_then(|s| s.as_str()),
            fields_current: overall::fields_current(outgoing.fields, &wanted),
            generation: cr.metadata.generation,
        };
        overall::to_carry(&live, &summary.overall, wanted)
    })
}

#[cfg(test)]
mod tests;
