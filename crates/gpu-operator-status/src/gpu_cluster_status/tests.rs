//! The GPUCluster summary from its operands' conditions: ready, each kind of not ready, disabled,
//! a spec change being caught up with, and the generation it is of.

use gpu_operator_api::{GpuClusterSpec, GpuClusterStatus};
use k8s_openapi::{
    apimachinery::pkg::apis::meta::v1::{Condition, Time},
    jiff::Timestamp,
};

use super::*;

const OPERANDS: [&str; 2] = ["DRADriverReady", "DRAValidatorReady"];

fn cluster(conditions: Vec<Condition>) -> GpuCluster {
    let mut cr = GpuCluster::new("gpu-cluster", GpuClusterSpec::default());
    cr.metadata.generation = Some(3);
    cr.status = Some(GpuClusterStatus {
        conditions: Some(conditions),
        ..GpuClusterStatus::default()
    });
    cr
}

fn cond(type_: &str, status: &str, reason: &str, message: &str, generation: i64) -> Condition {
    Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message: message.into(),
        observed_generation: Some(generation),
        last_transition_time: Time(Timestamp::from_second(1).unwrap()),
    }
}

#[test]
fn ready_when_every_operand_is_ready_at_the_current_generation() {
    let s = summarize(
        &cluster(vec![
            cond(
                "DRADriverReady",
                "True",
                "Ready",
                "ready on 2/2 GPU nodes",
                3,
            ),
            cond("DRAValidatorReady", "True", "Ready", "", 3),
        ]),
        &OPERANDS,
    );
    assert_eq!(s.overall.state, "ready");
    assert!(s.overall.ready.status && s.overall.ready.reason == reason::RECONCILED);
    assert!(!s.overall.error.status);
    assert_eq!(s.observed_generation, Some(3));
}

#[test]
fn a_rollout_or_a_missing_operand_is_not_ready_naming_them() {
    let s = summarize(
        &cluster(vec![cond(
            "DRADriverReady",
            "False",
            "RollingOut",
            "ready on 1/2",
            3,
        )]),
        &OPERANDS,
    );
    assert_eq!(s.overall.state, "notReady");
    assert_eq!(s.overall.ready.reason, reason::OPERAND_NOT_READY);
    assert_eq!(
        (s.overall.error.status, s.overall.error.reason.as_str()),
        (true, reason::OPERAND_NOT_READY)
    );
    let message = &s.overall.ready.message;
    assert!(
        message.contains("DRADriverReady (RollingOut)")
            && message.contains("DRAValidatorReady (not yet reconciled)"),
        "{message}"
    );
    assert!(!s.overall.catching_up);
    assert_eq!(
        s.observed_generation, None,
        "an operand has not written yet"
    );
}

#[test]
fn a_failed_operand_is_nvidias_error_naming_its_message() {
    let s = summarize(
        &cluster(vec![
            cond(
                "DRADriverReady",
                "False",
                "PrerequisiteNotMet",
                "resource.k8s.io/v1 is not served",
                3,
            ),
            cond("DRAValidatorReady", "True", "Ready", "", 3),
        ]),
        &OPERANDS,
    );
    assert_eq!(s.overall.state, "notReady");
    assert_eq!(
        (s.overall.ready.status, s.overall.ready.reason.as_str()),
        (false, reason::ERROR)
    );
    assert_eq!(s.overall.error.reason, reason::RECONCILE_FAILED);
    assert!(
        s.overall
            .error
            .message
            .contains("DRADriverReady: resource.k8s.io/v1 is not served")
    );
}

#[test]
fn operands_behind_a_spec_change_are_catching_up_with_the_oldest_generation() {
    let s = summarize(
        &cluster(vec![
            cond("DRADriverReady", "True", "Ready", "", 2),
            cond("DRAValidatorReady", "True", "Ready", "", 3),
        ]),
        &OPERANDS,
    );
    assert_eq!((s.overall.state, s.overall.catching_up), ("notReady", true));
    assert_eq!(s.observed_generation, Some(2));
}

#[test]
fn every_operand_disabled_is_nvidias_disabled() {
    let s = summarize(
        &cluster(vec![
            cond("DRADriverReady", "True", "Disabled", "", 3),
            cond("DRAValidatorReady", "True", "Disabled", "", 3),
        ]),
        &OPERANDS,
    );
    assert_eq!(s.overall.state, "disabled");
    assert!(!s.overall.ready.status && s.overall.error.status);
    let one = summarize(
        &cluster(vec![
            cond("DRADriverReady", "True", "Ready", "", 3),
            cond("DRAValidatorReady", "True", "Disabled", "", 3),
        ]),
        &OPERANDS,
    );
    assert_eq!(one.overall.state, "ready");
}
