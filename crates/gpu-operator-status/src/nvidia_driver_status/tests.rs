//! The NVIDIADriver summary from its driver condition: each state, NVIDIA's reasons, the nodes
//! and counts carried into the message, and a spec change being caught up with.

use gpu_operator_api::{NvidiaDriverSpec, NvidiaDriverStatus};
use k8s_openapi::{
    apimachinery::pkg::apis::meta::v1::{Condition, Time},
    jiff::Timestamp,
};

use gpu_operator_api::conditions::reason::{CONFLICTING_NODE_SELECTOR, DRIVER_NOT_READY};

use super::*;

fn driver(condition: Option<Condition>) -> NvidiaDriver {
    let mut cr = NvidiaDriver::new("pool-a", NvidiaDriverSpec::default());
    cr.metadata.generation = Some(2);
    cr.status = Some(NvidiaDriverStatus {
        state: NvidiaDriverState::NotReady,
        conditions: Some(condition.into_iter().collect()),
        ..NvidiaDriverStatus::default()
    });
    cr
}

fn cond(status: &str, reason: &str, message: &str, generation: i64) -> Condition {
    Condition {
        type_: DRIVER_READY.into(),
        status: status.into(),
        reason: reason.into(),
        message: message.into(),
        observed_generation: Some(generation),
        last_transition_time: Time(Timestamp::from_second(1).unwrap()),
    }
}

#[test]
fn ready_when_the_driver_is_ready_on_every_node_with_the_counts() {
    let s = summarize(&driver(Some(cond(
        "True",
        "Ready",
        "ready on 3/3 GPU nodes",
        2,
    ))));
    assert_eq!(s.overall.state, "ready");
    assert!(s.overall.ready.status && s.overall.ready.reason == reason::RECONCILED);
    assert!(s.overall.ready.message.contains("ready on 3/3 GPU nodes"));
    assert!(!s.overall.error.status);
    assert_eq!(s.observed_generation, Some(2));
}

#[test]
fn a_rollout_is_not_ready_naming_the_counts_and_the_problem_nodes() {
    let message = "ready on 1/3 GPU nodes; not ready on kwok-2: ContainerCreating";
    let s = summarize(&driver(Some(cond("False", "NotReady", message, 2))));
    assert_eq!(s.overall.state, "notReady");
    assert_eq!(
        (s.overall.ready.status, s.overall.ready.reason.as_str()),
        (false, reason::ERROR),
        "NVIDIA's Ready=False reason"
    );
    assert_eq!(
        (s.overall.error.status, s.overall.error.reason.as_str()),
        (true, DRIVER_NOT_READY)
    );
    for text in [&s.overall.ready.message, &s.overall.error.message] {
        assert!(
            text.contains("1/3") && text.contains("kwok-2: ContainerCreating"),
            "{text}"
        );
    }
    assert!(!s.overall.catching_up);
}

#[test]
fn a_conflict_is_not_ready_naming_the_node_and_the_other_driver() {
    let message = "ready on 1/1 GPU nodes; spec.nodeSelector of NVIDIADriver pool-a selects node \
                   kwok-3 that NVIDIADriver pool-b selects too";
    for reason_of_warning in [owners::CONFLICT, owners::DEFAULTS, owners::NONE_SELECTED] {
        let s = summarize(&driver(Some(cond("True", reason_of_warning, message, 2))));
        assert_eq!(s.overall.state, "notReady");
        assert_eq!(s.overall.error.reason, CONFLICTING_NODE_SELECTOR);
        assert!(
            s.overall.ready.message.contains("kwok-3")
                && s.overall.ready.message.contains("pool-b")
        );
    }
}

#[test]
fn a_failure_is_a_reconcile_failure_and_disabled_is_nvidias_disabled() {
    let s = summarize(&driver(Some(cond(
        "False",
        "ImageUnresolvable",
        "spec.image: no image",
        2,
    ))));
    assert_eq!(s.overall.state, "notReady");
    assert_eq!(s.overall.error.reason, reason::RECONCILE_FAILED);
    assert!(s.overall.error.message.contains("spec.image: no image"));
    let s = summarize(&driver(Some(cond(
        "True",
        "Disabled",
        "nothing deployed",
        2,
    ))));
    assert_eq!(s.overall.state, "disabled");
    assert_eq!(
        (
            s.overall.ready.status,
            s.overall.error.status,
            s.overall.error.reason.as_str()
        ),
        (false, true, reason::RECONCILED)
    );
}

#[test]
fn no_condition_or_an_older_one_is_not_ready_and_only_the_older_one_is_catching_up() {
    let s = summarize(&driver(None));
    assert_eq!(
        (s.overall.state, s.overall.catching_up),
        ("notReady", false)
    );
    assert_eq!(s.observed_generation, None);
    let s = summarize(&driver(Some(cond(
        "True",
        "Ready",
        "ready on 3/3 GPU nodes",
        1,
    ))));
    assert_eq!((s.overall.state, s.overall.catching_up), ("notReady", true));
    assert_eq!(s.observed_generation, Some(1), "the generation it is of");
    assert!(s.overall.ready.message.contains("not reconciled yet"));
}
