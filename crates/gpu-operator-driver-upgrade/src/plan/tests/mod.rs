//! The state machine against hand-written fleets: NVIDIA's order of states, the policy fields,
//! the admission limits, and the ways a node gets stuck or fails.

use std::time::Duration;

use gpu_operator_api::spec::{DrainSpec, DriverUpgradePolicySpec, WaitForCompletionSpec};
use k8s_openapi::{apimachinery::pkg::util::intstr::IntOrString, jiff::Timestamp};

use super::*;
use crate::{
    facts::PodFacts,
    policy::VALIDATION_TIMEOUT,
    state::{FAILURE_REASON, RESTART_POD, STATE_SINCE, UPGRADE_REQUESTED},
};

mod gpu_clients;
mod removal;

fn t(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + seconds).unwrap()
}

fn driver(uid: &str, created: i64, in_sync: bool, ready: bool) -> PodFacts {
    PodFacts {
        name: format!("nvidia-driver-daemonset-{uid}"),
        uid: uid.into(),
        created: t(created),
        ready,
        terminating: false,
        in_sync,
        older_template: false,
    }
}

fn validator(uid: &str, created: i64, ready: bool) -> PodFacts {
    PodFacts {
        name: format!("nvidia-operator-validator-{uid}"),
        in_sync: true,
        ..driver(uid, created, true, ready)
    }
}

/// A Ready, schedulable GPU node whose driver pod is out of date, with no upgrade state yet.
fn node(name: &str) -> NodeFacts {
    NodeFacts {
        name: name.into(),
        ready: true,
        upgrade_enabled: true,
        driver: Some(driver("old", 0, false, true)),
        validator: Some(validator("v-old", 1, true)),
        ..NodeFacts::default()
    }
}

fn in_state(name: &str, state: UpgradeState) -> NodeFacts {
    NodeFacts {
        state: Some(state),
        since: Some(t(100)),
        unschedulable: state.in_progress() && state != UpgradeState::CordonRequired,
        ..node(name)
    }
}

fn policy(spec: DriverUpgradePolicySpec) -> Policy {
    Policy::resolve(Some(&DriverUpgradePolicySpec {
        auto_upgrade: Some(true),
        ..spec
    }))
    .unwrap()
}

fn gpu_pod(name: &str) -> Workload {
    Workload {
        namespace: "ml".into(),
        name: name.into(),
        gpu: true,
        controlled: true,
        ..Workload::default()
    }
}

/// Applies `step`'s patch to `node` as the API server would, and what the DaemonSet controller
/// and kwok do to deleted pods (a new one, Ready, created at `now`).
fn apply(node: &mut NodeFacts, step: &Step, now: i64) {
    match step.patch.state {
        StateLabel::Set(s) => node.state = Some(s),
        StateLabel::Remove => node.state = None,
        StateLabel::Keep => {}
    }
    if let Some(u) = step.patch.unschedulable {
        node.unschedulable = u;
    }
    if let Some(client) = step.patch.client {
        node.client = Some(client.to_owned());
    }
    for (key, value) in &step.patch.annotations {
        match *key {
            STATE_SINCE => node.since = value.as_ref().map(|v| v.parse().unwrap()),
            FAILURE_REASON => node.failure.clone_from(value),
            RESTART_POD => node.restart_pod.clone_from(value),
            UPGRADE_REQUESTED => node.requested = value.is_some(),
            k if k == labels::DRIVER_UPGRADE_INITIAL_UNSCHEDULABLE => {
                node.initially_unschedulable = value.is_some();
            }
            _ => {}
        }
    }
    for (_, uid) in &step.delete {
        if node.driver.as_ref().is_some_and(|d| &d.uid == uid) {
            node.driver = Some(driver(&format!("new{now}"), now, true, true));
        }
        if node.validator.as_ref().is_some_and(|v| &v.uid == uid) {
            node.validator = Some(validator(&format!("v{now}"), now, true));
        }
    }
}

/// Runs one node alone through the machine; returns the states it went through.
fn walk(
    mut node: NodeFacts,
    policy: &Policy,
    workloads: &[Workload],
) -> (Vec<UpgradeState>, NodeFacts) {
    let mut seen = Vec::new();
    for i in 1..40 {
        let admitted = admit(std::slice::from_ref(&node), policy).contains(&node.name);
        let s = step(&node, policy, admitted, workloads, t(1000 + i));
        apply(&mut node, &s, 1000 + i);
        if let StateLabel::Set(state) = s.patch.state {
            seen.push(state);
        }
        if node.state == Some(UpgradeState::Done) && !seen.is_empty() {
            break;
        }
    }
    (seen, node)
}

#[test]
fn a_node_goes_through_nvidias_states_in_order() {
    use UpgradeState::*;
    let jobs = policy(DriverUpgradePolicySpec {
        wait_for_completion: Some(WaitForCompletionSpec {
            pod_selector: Some("app=training".into()),
            timeout_seconds: None,
        }),
        ..DriverUpgradePolicySpec::default()
    });
    let (states, after) = walk(node("a"), &jobs, &[]);
    // reference §1.7, drain disabled (NVIDIA's default), so no drain-required.
    assert_eq!(
        states,
        [
            Required,
            CordonRequired,
            WaitForJobsRequired,
            PodDeletionRequired,
            PodRestartRequired,
            ValidationRequired,
            UncordonRequired,
            Done
        ]
    );
    assert!(!after.unschedulable, "uncordoned at the end");
    assert!(after.driver.unwrap().in_sync);
    // Without waitForCompletion.podSelector there is no job to wait for: no wait-for-jobs-required,
    // and the patch that leaves cordon-required cordons the node.
    let plain = policy(DriverUpgradePolicySpec::default());
    let (states, after) = walk(node("a"), &plain, &[]);
    assert_eq!(
        states,
        [
            Required,
            CordonRequired,
            PodDeletionRequired,
            PodRestartRequired,
            ValidationRequired,
            UncordonRequired,
            Done
        ]
    );
    assert!(!after.unschedulable, "uncordoned at the end");
    let s = step(&in_state("a", CordonRequired), &plain, false, &[], t(200));
    assert_eq!(
        (s.patch.state, s.patch.unschedulable),
        (StateLabel::Set(PodDeletionRequired), Some(true)),
        "the cordon goes with the move past wait-for-jobs-required"
    );
    let drain = policy(DriverUpgradePolicySpec {
        drain: Some(DrainSpec {
            enable: Some(true),
            ..DrainSpec::default()
        }),
        ..DriverUpgradePolicySpec::default()
    });
    let (states, _) = walk(node("a"), &drain, &[]);
    assert_eq!(states[3], DrainRequired);
    assert_eq!(states[4], PodRestartRequired);
}

#[test]
fn a_node_in_sync_is_done_without_restart() {
    let mut n = node("a");
    n.driver = Some(driver("old", 0, true, true));
    let s = step(
        &n,
        &policy(DriverUpgradePolicySpec::default()),
        false,
        &[],
        t(5),
    );
    assert_eq!(s.patch.state, StateLabel::Set(UpgradeState::Done));
    assert!(s.delete.is_empty() && s.evict.is_empty());
    // A user's request upgrades it all the same, and its in-sync pod is restarted.
    n.requested = true;
    let (states, after) = walk(n, &policy(DriverUpgradePolicySpec::default()), &[]);
    assert_eq!(states[0], UpgradeState::Required);
    assert_ne!(after.driver.unwrap().uid, "old");
    assert!(!after.requested, "the request is consumed");
}

#[test]
fn a_pod_on_an_older_template_of_ours_is_restarted_in_place_without_cordon_or_eviction() {
    use UpgradeState::*;
    let mut n = node("a");
    n.driver = Some(PodFacts {
        older_template: true,
        ..driver("old", 0, true, true)
    });
    let workloads = [gpu_pod("train")];
    let (states, after) = walk(
        n.clone(),
        &policy(DriverUpgradePolicySpec::default()),
        &workloads,
    );
    assert_eq!(
        states,
        [
            Required,
            PodRestartRequired,
            ValidationRequired,
            UncordonRequired,
            Done
        ]
    );
    assert_ne!(after.driver.unwrap().uid, "old", "the pod was restarted");
    assert!(!after.unschedulable, "never cordoned");
    // Admission names the restart as what it is, and no GPU pod is evicted on the way.
    let required = in_state("a", Required);
    let admitted = step(
        &NodeFacts {
            driver: n.driver.clone(),
            unschedulable: false,
            ..required
        },
        &policy(DriverUpgradePolicySpec::default()),
        true,
        &workloads,
        t(5),
    );
    assert_eq!(admitted.patch.state, StateLabel::Set(PodRestartRequired));
    assert_eq!(admitted.patch.unschedulable, None);
    assert!(admitted.evict.is_empty());
    assert_eq!(
        admitted.event.as_ref().map(|e| e.reason),
        Some("DriverRestartInPlace")
    );
    // The limits hold: with one slot and one node upgrading, it waits.
    let busy = in_state("b", PodDeletionRequired);
    let one = policy(DriverUpgradePolicySpec {
        max_parallel_upgrades: Some(1),
        ..DriverUpgradePolicySpec::default()
    });
    let fleet = [
        NodeFacts {
            driver: n.driver.clone(),
            ..in_state("a", Required)
        },
        busy,
    ];
    assert!(admit(&fleet, &one).is_empty());
    // A pod another operator made (adopted from NVIDIA's) is not refreshed: a switch of operators
    // restarts nothing.
    let mut adopted = node("c");
    adopted.driver = Some(driver("nv", 0, true, true));
    let s = step(&adopted, &one, false, &[], t(5));
    assert_eq!(s.patch.state, StateLabel::Set(Done));
    // A skipped node is left as it is.
    n.skip = true;
    let s = step(&n, &one, true, &[], t(5));
    assert!(!s.writes(), "{s:?}");
}

#[test]
fn a_node_cordoned_before_stays_cordoned() {
    let mut n = node("a");
    n.unschedulable = true;
    let (states, after) = walk(n, &policy(DriverUpgradePolicySpec::default()), &[]);
    assert_eq!(states.last(), Some(&UpgradeState::Done));
    assert!(after.unschedulable);
    assert!(
        !after.initially_unschedulable,
        "the record is removed once done"
    );
}

#[test]
fn admission_honours_max_parallel_and_max_unavailable_counting_unavailable_nodes() {
    let required = |name: &str| in_state(name, UpgradeState::Required);
    // 12 nodes, 25% → 3 may be unavailable; one is NotReady already and one is upgrading.
    let mut fleet: Vec<NodeFacts> = (0..10).map(|i| required(&format!("n{i:02}"))).collect();
    fleet.push(NodeFacts {
        ready: false,
        ..in_state("x-notready", UpgradeState::Done)
    });
    fleet.push(in_state("x-busy", UpgradeState::PodDeletionRequired));
    let unlimited = policy(DriverUpgradePolicySpec {
        max_parallel_upgrades: Some(0),
        ..DriverUpgradePolicySpec::default()
    });
    assert_eq!(admit(&fleet, &unlimited), ["n00"]);
    let one = policy(DriverUpgradePolicySpec::default());
    assert!(
        admit(&fleet, &one).is_empty(),
        "x-busy holds the one parallel slot"
    );
    let two = policy(DriverUpgradePolicySpec {
        max_parallel_upgrades: Some(2),
        max_unavailable: Some(IntOrString::String("50%".into())),
        ..DriverUpgradePolicySpec::default()
    });
    assert_eq!(admit(&fleet, &two), ["n00"]);
    // 13 nodes: 4 may be unavailable. A failed node counts against it like any other.
    fleet.push(in_state("x-failed", UpgradeState::Failed));
    assert_eq!(admit(&fleet, &unlimited), ["n00"]);
    let mut healthy = fleet.clone();
    healthy.last_mut().unwrap().state = Some(UpgradeState::Done);
    assert_eq!(admit(&healthy, &unlimited), ["n00", "n01"]);
    // A node cordoned by its user needs no maxUnavailable slot.
    fleet[5].unschedulable = true;
    assert_eq!(admit(&fleet, &unlimited), ["n05"]);
}

#[test]
fn a_skipped_node_is_never_admitted_nor_moved() {
    let mut n = in_state("a", UpgradeState::Required);
    n.skip = true;
    let p = policy(DriverUpgradePolicySpec {
        max_parallel_upgrades: Some(0),
        ..DriverUpgradePolicySpec::default()
    });
    assert!(admit(std::slice::from_ref(&n), &p).is_empty());
    let s = step(&n, &p, false, &[], t(500));
    assert!(!s.writes());
    assert!(
        s.wait
            .unwrap()
            .reason
            .contains("nvidia.com/gpu-driver-upgrade.skip")
    );
    // Not even labelled: a skipped node with no state keeps none, and a done one stays done.
    for state in [None, Some(UpgradeState::Done)] {
        let mut fresh = node("b");
        fresh.skip = true;
        fresh.state = state;
        fresh.upgrade_enabled = false;
        let s = step(&fresh, &p, false, &[], t(500));
        assert!(!s.writes(), "{s:?}");
    }
    // The positive control: without the label the same node moves.
    let s = step(&node("b"), &p, false, &[], t(500));
    assert_eq!(s.patch.state, StateLabel::Set(UpgradeState::Required));
}

#[test]
fn a_failed_node_waits_for_the_user_and_then_retries_without_uncordoning() {
    let p = policy(DriverUpgradePolicySpec::default());
    let mut n = in_state("a", UpgradeState::Failed);
    n.unschedulable = true;
    n.failure = Some("validator pod x not Ready after 600s".into());
    n.driver = Some(driver("new", 105, true, true));
    // NVIDIA would move it on by itself once its pod is in sync (#2549); we do not.
    assert!(admit(std::slice::from_ref(&n), &p).is_empty());
    let s = step(&n, &p, false, &[], t(100_000));
    assert!(!s.writes());
    assert!(s.wait.unwrap().reason.contains("validator pod x"));
    n.requested = true;
    assert_eq!(admit(std::slice::from_ref(&n), &p), ["a"]);
    let (states, after) = walk(n, &p, &[]);
    assert_eq!(states[0], UpgradeState::CordonRequired);
    assert_eq!(states.last(), Some(&UpgradeState::Done));
    assert!(!after.unschedulable, "our own cordon is lifted");
    assert!(after.failure.is_none());
}

#[test]
fn release_removes_the_state_label_and_our_annotations() {
    let mut n = in_state("a", UpgradeState::Done);
    let patch = release(&n).unwrap();
    assert_eq!(patch.state, StateLabel::Remove);
    assert!(
        patch
            .annotations
            .contains_key(labels::DRIVER_UPGRADE_ENABLED)
    );
    n.state = None;
    n.since = None;
    n.upgrade_enabled = false;
    assert_eq!(release(&n), None);
}

#[test]
fn a_state_without_a_start_time_gets_one_and_timeouts_count_from_it() {
    let mut n = in_state("a", UpgradeState::ValidationRequired);
    n.since = None;
    n.driver = Some(driver("new", 105, true, true));
    n.validator = Some(validator("v", 107, false));
    let s = step(
        &n,
        &policy(DriverUpgradePolicySpec::default()),
        false,
        &[],
        t(10_000),
    );
    assert_eq!(
        s.patch.state,
        StateLabel::Keep,
        "no start time: the timeout starts now"
    );
    assert_eq!(
        s.patch.annotations[STATE_SINCE],
        Some(t(10_000).to_string())
    );
    assert!(Duration::from_secs(600) == VALIDATION_TIMEOUT);
}
