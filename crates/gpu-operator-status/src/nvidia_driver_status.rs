//! Each NVIDIADriver's overall status, NVIDIA's contract: `state` (`ready`, `notReady`,
//! `disabled`), `namespace` and the paired `Ready`/`Error` conditions, summed up ([`summarize`],
//! pure) from the `DriverReady` condition its driver reconciler writes, and written like the
//! ClusterPolicy's ([`crate::overall::write`]). The message carries that condition's ready/desired
//! nodes and first problem nodes with their reasons, and names the nodes another NVIDIADriver
//! selects too. Ours beside NVIDIA's: `observedGeneration`, the generation the summary is of.

use std::{
    sync::{Arc, Weak},
    time::{Duration, Instant},
};

use gpu_operator_api::{
    NvidiaDriver,
    conditions::{
        self as names,
        operand::DRIVER_READY,
        reason::{self, CONFLICTING_NODE_SELECTOR, DRIVER_NOT_READY},
    },
    nvidia_driver::NvidiaDriverState,
};
use gpu_operator_core::{
    Context, Error,
    pipeline::status_batch::{Outgoing, Summarizer},
    report::conditions::Desired,
};
use gpu_operator_driver::owners;
use kube::runtime::controller::Action;

use crate::overall::{self, Overall};

/// Name of this reconciler (metric label).
pub const NAME: &str = "nvidia-driver-status";

/// Reasons of the driver's condition that mean "still rolling out" rather than "failed".
const PROGRESS_REASONS: [&str; 3] = ["NotReady", "RollingOut", "OldRevision"];
/// Reasons of a `True` driver condition that still leave nodes unserved, or serve none: the
/// placement warnings, each a `nodeSelector` or `default` to change.
const SELECTOR_REASONS: [&str; 3] = [owners::CONFLICT, owners::DEFAULTS, owners::NONE_SELECTED];
/// Reason of the driver's condition while the ClusterPolicy does not hand the drivers over.
const DISABLED_REASON: &str = "Disabled";

/// What an NVIDIADriver's overall status should say, and the generation it is of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    /// `state`, `Ready` and `Error`.
    pub overall: Overall,
    /// `observedGeneration`: the generation of the driver's condition it sums up.
    pub observed_generation: Option<i64>,
}

/// Sums up `cr`'s driver condition. Pure.
pub fn summarize(cr: &NvidiaDriver) -> Summary {
    let generation = cr.metadata.generation;
    let live = cr
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    let driver = live.iter().find(|c| c.type_ == DRIVER_READY);
    let Some(driver) = driver else {
        return not_ready(
            DRIVER_NOT_READY,
            format!("{DRIVER_READY}: not reconciled yet"),
            false,
            None,
        );
    };
    let observed = driver.observed_generation;
    let said = format!("{DRIVER_READY} ({}): {}", driver.reason, driver.message);
    if observed != generation {
        return not_ready(
            DRIVER_NOT_READY,
            format!("{DRIVER_READY}: generation {generation:?} not reconciled yet; was {said}"),
            true,
            observed,
        );
    }
    match (driver.status.as_str(), driver.reason.as_str()) {
        ("True", DISABLED_REASON) => summary(
            NvidiaDriverState::Disabled,
            Desired::not_ok(names::READY, reason::RECONCILED, said),
            observed,
        ),
        ("True", r) if SELECTOR_REASONS.contains(&r) => {
            not_ready(CONFLICTING_NODE_SELECTOR, said, false, observed)
        }
        ("True", _) => summary(
            NvidiaDriverState::Ready,
            Desired::ok(names::READY, reason::RECONCILED, said),
            observed,
        ),
        (_, r) if PROGRESS_REASONS.contains(&r) => {
            not_ready(DRIVER_NOT_READY, said, false, observed)
        }
        _ => not_ready(reason::RECONCILE_FAILED, said, false, observed),
    }
}

/// `notReady` for `cause` (NVIDIA's reason of the `Error` condition).
fn not_ready(
    cause: &str,
    message: String,
    catching_up: bool,
    observed_generation: Option<i64>,
) -> Summary {
    let mut summary = summary(
        NvidiaDriverState::NotReady,
        Desired::not_ok(names::READY, cause, message),
        observed_generation,
    );
    summary.overall.catching_up = catching_up;
    summary
}

/// NVIDIA's pair from `ready` (its reason the cause): a `Ready` that is `False` has the reason
/// `Error`, and `Error` carries the cause.
fn summary(state: NvidiaDriverState, ready: Desired, observed_generation: Option<i64>) -> Summary {
    let error = overall::error_condition(&ready);
    let ready = if ready.status {
        ready
    } else {
        Desired::not_ok(names::READY, reason::ERROR, ready.message)
    };
    Summary {
        overall: Overall {
            state: state.as_str(),
            ready,
            error,
            catching_up: false,
        },
        observed_generation,
    }
}

/// Reconciles the overall status of `cr` (nothing for one being deleted).
pub async fn reconcile(cr: Arc<NvidiaDriver>, ctx: Arc<Context>) -> Result<Action, Error> {
    if cr.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let started = Instant::now();
    let summary = summarize(&cr);
    let wanted = overall::namespaced_fields(Some(&ctx.namespace), summary.observed_generation);
    let live = cr.status.as_ref().map_or_else(serde_json::Map::new, |s| {
        overall::namespaced_fields(s.namespace.as_deref(), s.observed_generation)
    });
    let fields_current = overall::fields_current(&live, &wanted);
    let deferred = overall::write(
        ctx.as_ref(),
        cr.as_ref(),
        &summary.overall,
        wanted,
        fields_current,
    );
    ctx.metrics.observe(NAME, started.elapsed(), None);
    Ok(Action::requeue(
        deferred.unwrap_or(Duration::from_secs(3600)),
    ))
}

/// An NVIDIADriver's overall status found for each status request of its operands' conditions
/// (see [`gpu_operator_core::pipeline::status_batch::Summarizer`]).
pub fn summarizer(ctx: Weak<Context>) -> Summarizer<NvidiaDriver> {
    Arc::new(move |cr: &NvidiaDriver, outgoing: Outgoing<'_>| {
        let ctx = ctx.upgrade()?;
        let mut cr = cr.clone();
        let status = cr.status.get_or_insert_with(Default::default);
        status.conditions = Some(outgoing.conditions.to_vec());
        let summary = summarize(&cr);
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
