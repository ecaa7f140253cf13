//! Writing an owner's overall status, for every [`Owner`] kind alike: NVIDIA's `state` and the
//! paired `Ready`/`Error` conditions (plus the kind's further fields, such as `namespace`),
//! written only when they moved what a user reads, through the write gate, in the owner's status
//! batch; and, for a status request going out anyway, what it should carry of them
//! ([`to_carry`]). What the status says is each kind's own summary
//! ([`crate::policy_status::summarize`], [`crate::nvidia_driver_status::summarize`]).

use std::time::{Duration, Instant};

use gpu_operator_api::conditions::{self as names, reason};
use gpu_operator_core::{
    Context,
    contract::Owner,
    pipeline::{
        status_batch, status_write,
        write_gate::{Decision, Move},
    },
    report::conditions::{self, Desired},
};
use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Condition, jiff::Timestamp};
use serde_json::{Map, Value, json};

/// Name of the status reconcilers (metric label): one per object, for every kind.
pub const NAME: &str = "status";

/// What an owner's overall status should say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Overall {
    /// `status.state`, as written (`ready`, `notReady`, ...).
    pub state: &'static str,
    /// The `Ready` condition, as written.
    pub ready: Desired,
    /// The `Error` condition, as written (the opposite of `Ready`: see [`error_condition`]).
    pub error: Desired,
    /// Not ready only because the operands have not acknowledged the current generation yet (a
    /// spec change they are reconciling this very moment): a ready status waits a moment before
    /// turning `notReady`, which would flap.
    pub catching_up: bool,
}

/// The value of `status.state` of an owner that is ready.
const READY_STATE: &str = "ready";

/// NVIDIA's `Error` condition, the opposite of `Ready`.
pub fn error_condition(ready: &Desired) -> Desired {
    if ready.status {
        Desired::not_ok(names::ERROR, reason::READY, String::new())
    } else {
        Desired::ok(names::ERROR, &ready.reason, ready.message.clone())
    }
}

/// The ClusterPolicy's `Ready`: `False` keeps NVIDIA's reason `Error` when the cause is a failure.
pub fn ready_condition(ready: &Desired) -> Desired {
    let mut ready = ready.clone();
    if !ready.status && ready.reason == reason::RECONCILE_FAILED {
        reason::ERROR.clone_into(&mut ready.reason);
    }
    ready
}

/// What of an owner's overall status is live (or about to be, in the status request going out).
#[derive(Clone, Copy, Debug)]
pub struct Live<'a> {
    /// Its conditions.
    pub conditions: &'a [Condition],
    /// Its `state`.
    pub state: Option<&'a str>,
    /// Whether its further fields (`namespace`, …) say what the kind writes.
    pub fields_current: bool,
    /// The owner's generation.
    pub generation: Option<i64>,
}

impl Live<'_> {
    /// Whether it says `overall` already.
    fn says(&self, overall: &Overall) -> bool {
        self.state == Some(overall.state)
            && self.fields_current
            && [&overall.ready, &overall.error]
                .iter()
                .all(|d| conditions::is_current(self.conditions, d, self.generation))
    }

    /// Whether `overall` waits: `ready` turning `notReady` only because the operands are catching
    /// up, which would flap.
    fn holds(&self, overall: &Overall) -> bool {
        overall.catching_up && self.state == Some(READY_STATE)
    }

    /// What `overall` moves of what a user reads (see [`write`]).
    fn moved(&self, overall: &Overall) -> Move {
        if self.state.is_none() || (overall.state == READY_STATE && self.state != Some(READY_STATE))
        {
            Move::Ready
        } else if !self.fields_current
            || (!self.holds(overall)
                && (self.state != Some(overall.state)
                    || [&overall.ready, &overall.error]
                        .iter()
                        .any(|d| conditions::moved(self.conditions, d, self.generation))))
        {
            Move::Other
        } else {
            Move::None
        }
    }

    /// `overall` as a status request carries it, `fields` beside `state`.
    fn carried(&self, overall: &Overall, mut fields: Map<String, Value>) -> status_batch::Overall {
        let now = Timestamp::now();
        fields.insert("state".to_owned(), json!(overall.state));
        status_batch::Overall {
            fields,
            conditions: [&overall.ready, &overall.error]
                .iter()
                .map(|d| conditions::merge(self.conditions, d, self.generation, now))
                .collect(),
        }
    }
}

/// The further status fields of the v1alpha1 kinds (NVIDIADriver, GPUCluster).
const NAMESPACED_FIELDS: [&str; 2] = ["namespace", "observedGeneration"];

/// A v1alpha1 kind's further status fields, `namespace` and `observedGeneration`, as its status
/// carries them.
pub fn namespaced_fields(namespace: Option<&str>, generation: Option<i64>) -> Map<String, Value> {
    let mut fields = Map::new();
    if let Some(namespace) = namespace {
        fields.insert(NAMESPACED_FIELDS[0].to_owned(), json!(namespace));
    }
    if let Some(generation) = generation {
        fields.insert(NAMESPACED_FIELDS[1].to_owned(), json!(generation));
    }
    fields
}

/// Whether the status carrying `have` needs no write for the `wanted` fields of
/// [`namespaced_fields`].
pub fn fields_current(have: &Map<String, Value>, wanted: &Map<String, Value>) -> bool {
    NAMESPACED_FIELDS
        .iter()
        .all(|key| have.get(*key) == wanted.get(*key))
}

/// The overall status a status request going out anyway should carry instead of `live` (see
/// [`gpu_operator_core::pipeline::status_batch::Summarizer`]): `overall` unless `live` says it
/// already or it waits for catching-up operands. A change of the message alone goes along: the
/// request costs nothing more.
pub fn to_carry(
    live: &Live<'_>,
    overall: &Overall,
    fields: Map<String, Value>,
) -> Option<status_batch::Overall> {
    (!live.says(overall) && !live.holds(overall)).then(|| live.carried(overall, fields))
}

/// Writes `overall` to `owner` when it moved what a user reads (see
/// [`gpu_operator_core::pipeline::write_gate`]): no status yet and becoming ready are written at
/// once; a change of the message alone waits until it held still, and so does `ready` turning
/// `notReady` only because the operands are catching up. `fields` are the kind's further status
/// fields, and `fields_current` whether the live status already has them. It goes in the owner's
/// status batch, with the conditions that changed meanwhile. Returns how long a waiting change
/// waits.
pub fn write<K: Owner>(
    ctx: &Context,
    owner: &K,
    overall: &Overall,
    fields: Map<String, Value>,
    fields_current: bool,
) -> Option<Duration> {
    let live = Live {
        conditions: owner.conditions().unwrap_or_default(),
        state: owner.state(),
        fields_current,
        generation: owner.meta().generation,
    };
    let key = status_write::gate_key(owner, names::READY);
    if live.says(overall) {
        ctx.status_gate.written(&key, None);
        return None;
    }
    let detail = format!("{} {}", overall.state, overall.ready.message);
    if let Decision::Wait(after) =
        ctx.status_gate
            .decide(&key, live.moved(overall), None, &detail, Instant::now())
    {
        return Some(after);
    }
    tracing::debug!(kind = %K::kind(&()), state = overall.state, message = %overall.ready.message, "writing the status");
    ctx.status_batch
        .submit_overall(&ctx.client, owner, live.carried(overall, fields));
    ctx.status_gate.written(&key, None);
    None
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;

    fn overall(state: &'static str, ready: Desired, catching_up: bool) -> Overall {
        Overall {
            state,
            error: error_condition(&ready),
            ready,
            catching_up,
        }
    }

    fn ready() -> Overall {
        overall(
            READY_STATE,
            Desired::ok(names::READY, reason::RECONCILED, "ready on 3 GPU node(s)"),
            false,
        )
    }

    /// The live conditions of `overall` acknowledging `generation`.
    fn written(overall: &Overall, generation: i64) -> Vec<Condition> {
        let then = Time(Timestamp::from_second(1).unwrap_or_default());
        [&overall.ready, &overall.error]
            .iter()
            .map(|d| conditions::merge(&[], d, Some(generation), then.0))
            .collect()
    }

    fn live<'a>(conditions: &'a [Condition], state: &'static str, generation: i64) -> Live<'a> {
        Live {
            conditions,
            state: Some(state),
            fields_current: true,
            generation: Some(generation),
        }
    }

    #[test]
    fn a_new_generation_the_operands_acknowledged_goes_with_their_request() {
        let said = written(&ready(), 1);
        let carried = to_carry(&live(&said, READY_STATE, 2), &ready(), Map::new()).unwrap();
        assert_eq!(carried.fields.get("state"), Some(&json!("ready")));
        let generations: Vec<_> = carried
            .conditions
            .iter()
            .map(|c| (c.type_.as_str(), c.observed_generation))
            .collect();
        assert_eq!(
            generations,
            [(names::READY, Some(2)), (names::ERROR, Some(2))]
        );
        assert_eq!(
            carried.conditions[0].last_transition_time, said[0].last_transition_time,
            "the same status keeps its transition time"
        );
    }

    #[test]
    fn what_is_said_already_is_not_carried_again() {
        let said = written(&ready(), 2);
        assert_eq!(
            to_carry(&live(&said, READY_STATE, 2), &ready(), Map::new()),
            None
        );
    }

    #[test]
    fn ready_is_held_while_the_operands_catch_up_and_a_real_change_goes_at_once() {
        let said = written(&ready(), 1);
        let catching_up = overall(
            "notReady",
            Desired::not_ok(
                names::READY,
                reason::OPERAND_NOT_READY,
                "not yet reconciled",
            ),
            true,
        );
        assert_eq!(
            to_carry(&live(&said, READY_STATE, 2), &catching_up, Map::new()),
            None
        );
        let failed = overall(
            "notReady",
            Desired::not_ok(names::READY, reason::RECONCILE_FAILED, "DriverReady: bad"),
            false,
        );
        let carried = to_carry(&live(&said, READY_STATE, 2), &failed, Map::new()).unwrap();
        assert_eq!(carried.fields.get("state"), Some(&json!("notReady")));
    }

    #[test]
    fn a_change_of_the_message_alone_goes_along() {
        let waiting = |message: &str| {
            overall(
                "notReady",
                Desired::not_ok(names::READY, reason::OPERAND_NOT_READY, message),
                false,
            )
        };
        let said = written(&waiting("a (RollingOut); b (RollingOut)"), 2);
        let carried = to_carry(
            &live(&said, "notReady", 2),
            &waiting("b (RollingOut)"),
            Map::new(),
        )
        .unwrap();
        assert_eq!(carried.conditions[0].message, "b (RollingOut)");
    }
}
