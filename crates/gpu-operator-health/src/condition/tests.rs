//! A fault injected below the NVML boundary (a reading as the fake source returns it) drives the
//! conditions: set at once, cleared with hysteresis, XIDs kept until a reboot, nothing rewritten
//! while nothing changes.

use k8s_openapi::{api::core::v1::NodeCondition, apimachinery::pkg::apis::meta::v1::Time};

use super::*;
use crate::{
    faults::{self, reason},
    reading::{GpuReading, RecoveryAction, Slowdown, Unreadable, XidEvent},
};

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(1_764_000_000 + second).unwrap()
}

fn node(gpus: Vec<GpuReading>, xids: &[u64]) -> NodeReading {
    NodeReading {
        gpus,
        xids: xids
            .iter()
            .map(|&xid| XidEvent {
                gpu: Some(0),
                uuid: Some("GPU-00000000".into()),
                xid,
            })
            .collect(),
        xid_watch: None,
        other_unreadable: Vec::new(),
    }
}

/// One poll through the tracker, as the agent does it.
fn step(
    tracker: &mut Tracker,
    reading: &NodeReading,
    expected: Option<u32>,
    now: Timestamp,
) -> Vec<Desired> {
    let state = faults::state_faults(reading, expected);
    let xids = reading
        .xids
        .iter()
        .filter_map(|e| faults::xid_fault(e).ok())
        .collect();
    tracker.observe(reading, state, xids, now);
    tracker.desired()
}

fn get<'a>(desired: &'a [Desired], type_: &str) -> &'a Desired {
    desired.iter().find(|d| d.type_ == type_).unwrap()
}

/// Applies `changed` to `node` as the API server would.
fn apply(node: &mut Vec<NodeCondition>, changed: Vec<NodeCondition>) {
    for c in changed {
        node.retain(|o| o.type_ != c.type_);
        node.push(c);
    }
}

#[test]
fn a_healthy_node_is_written_once_then_never_again() {
    let mut tracker = Tracker::default();
    let mut on_node = Vec::new();
    let reading = node(vec![GpuReading::healthy(0), GpuReading::healthy(1)], &[]);
    let desired = step(&mut tracker, &reading, Some(2), at(0));
    assert_eq!(get(&desired, GPU_HEALTHY).status, "True");
    assert_eq!(get(&desired, GPU_HEALTHY).reason, HEALTHY_REASON);
    let first = changed(&on_node, &desired, at(0));
    assert_eq!(
        first.len(),
        TYPES.len(),
        "the first poll writes every condition"
    );
    apply(&mut on_node, first);
    for poll in 1..100 {
        let desired = step(&mut tracker, &reading, Some(2), at(poll * 30));
        assert!(
            changed(&on_node, &desired, at(poll * 30)).is_empty(),
            "poll {poll}"
        );
    }
}

#[test]
fn a_double_bit_error_sets_memory_error_at_once_and_clears_after_three_clean_polls() {
    let mut tracker = Tracker::default();
    let mut bad = GpuReading::healthy(1);
    bad.volatile_dbe = Ok(2);
    bad.aggregate_dbe = Ok(5);
    let faulty = node(vec![GpuReading::healthy(0), bad], &[]);
    let clean = node(vec![GpuReading::healthy(0), GpuReading::healthy(1)], &[]);

    let desired = step(&mut tracker, &faulty, Some(2), at(0));
    let memory = get(&desired, GPU_MEMORY_ERROR);
    assert_eq!(memory.status, "True");
    assert_eq!(memory.reason, reason::DOUBLE_BIT_ECC_REASON);
    assert!(
        memory.message.contains("GPU 1 (GPU-00000001)"),
        "{}",
        memory.message
    );
    assert!(
        memory
            .message
            .contains("2 volatile double-bit ECC errors, 5 over its life")
    );
    assert!(memory.message.contains("RESET_GPU"), "{}", memory.message);
    let summary = get(&desired, GPU_HEALTHY);
    assert_eq!(
        (summary.status, summary.reason.as_str()),
        ("False", reason::DOUBLE_BIT_ECC_REASON)
    );

    // A poll that misses the fault does not clear it (no flapping) ...
    for poll in 1..CLEAR_AFTER {
        let desired = step(&mut tracker, &clean, Some(2), at(i64::from(poll) * 30));
        assert_eq!(
            get(&desired, GPU_MEMORY_ERROR).status,
            "True",
            "poll {poll}"
        );
    }
    // ... and the fault coming back keeps its first-seen time.
    let desired = step(&mut tracker, &faulty, Some(2), at(200));
    assert!(
        get(&desired, GPU_MEMORY_ERROR)
            .message
            .contains(&seconds(at(0)))
    );
    for poll in 0..CLEAR_AFTER {
        let desired = step(&mut tracker, &clean, Some(2), at(300 + i64::from(poll)));
        let expected = if poll + 1 < CLEAR_AFTER {
            "True"
        } else {
            "False"
        };
        assert_eq!(
            get(&desired, GPU_MEMORY_ERROR).status,
            expected,
            "poll {poll}"
        );
    }
    let desired = tracker.desired();
    assert_eq!(get(&desired, GPU_HEALTHY).status, "True");
    assert_eq!(
        get(&desired, GPU_MEMORY_ERROR).reason,
        reason::NO_MEMORY_ERROR_REASON
    );
}

#[test]
fn an_xid_needing_a_reset_stays_until_the_node_reboots() {
    let mut tracker = Tracker::default();
    let gpus = || vec![GpuReading::healthy(0)];
    // XID 13 is the application's (RESTART_APP): no node fault.
    let desired = step(&mut tracker, &node(gpus(), &[13]), None, at(0));
    assert_eq!(get(&desired, GPU_XID_ERROR).status, "False");
    // XID 79, fallen off the bus: RESTART_BM.
    let desired = step(&mut tracker, &node(gpus(), &[79, 79]), None, at(10));
    let xid = get(&desired, GPU_XID_ERROR);
    assert_eq!(
        (xid.status, xid.reason.as_str()),
        ("True", reason::XID_REBOOT_REASON)
    );
    assert!(
        xid.message
            .contains("XID 79 ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS"),
        "{}",
        xid.message
    );
    assert!(
        xid.message.contains("2 times") && xid.message.contains("RESTART_BM"),
        "{}",
        xid.message
    );
    for poll in 1..10 {
        let desired = step(&mut tracker, &node(gpus(), &[]), None, at(10 + poll * 30));
        assert_eq!(get(&desired, GPU_XID_ERROR).status, "True");
    }

    // The agent restarts in the same boot: the condition is carried, nothing rewritten.
    let mut on_node = Vec::new();
    apply(&mut on_node, changed(&[], &tracker.desired(), at(400)));
    let mut resumed = Tracker::resume(&on_node, at(-1000));
    let desired = step(&mut resumed, &node(gpus(), &[]), None, at(500));
    assert_eq!(get(&desired, GPU_XID_ERROR).status, "True");
    assert!(changed(&on_node, &desired, at(500)).is_empty());

    // After a reboot (boot time after the condition's transition) it clears.
    let mut rebooted = Tracker::resume(&on_node, at(450));
    let desired = step(&mut rebooted, &node(gpus(), &[]), None, at(600));
    assert_eq!(get(&desired, GPU_XID_ERROR).status, "False");
    assert_eq!(get(&desired, GPU_HEALTHY).status, "True");
}

#[test]
fn a_lost_gpu_and_a_short_count_are_gpu_lost() {
    let mut tracker = Tracker::default();
    let mut lost = GpuReading::healthy(1);
    lost.lost = true;
    let desired = step(
        &mut tracker,
        &node(vec![GpuReading::healthy(0), lost], &[]),
        Some(4),
        at(0),
    );
    let condition = get(&desired, GPU_LOST);
    assert_eq!(
        (condition.status, condition.reason.as_str()),
        ("True", reason::FALLEN_OFF_BUS_REASON)
    );
    assert!(condition.message.contains("GPU 1"), "{}", condition.message);
    assert!(
        condition.message.contains("1 of 4 GPUs"),
        "{}",
        condition.message
    );
    assert_eq!(
        get(&desired, GPU_HEALTHY).reason,
        reason::FALLEN_OFF_BUS_REASON
    );
}

#[test]
fn throttling_is_reported_but_the_node_stays_healthy() {
    let mut tracker = Tracker::default();
    let mut hot = GpuReading::healthy(0);
    hot.slowdown = Ok(Slowdown {
        thermal: true,
        power_brake: false,
    });
    let desired = step(&mut tracker, &node(vec![hot], &[]), None, at(0));
    assert_eq!(get(&desired, GPU_THROTTLED).status, "True");
    assert_eq!(
        get(&desired, GPU_THROTTLED).reason,
        reason::THERMAL_SLOWDOWN_REASON
    );
    assert_eq!(get(&desired, GPU_HEALTHY).status, "True");
}

#[test]
fn the_drivers_recovery_action_and_row_remapping_are_faults() {
    let mut tracker = Tracker::default();
    let mut gpu = GpuReading::healthy(0);
    gpu.recovery_action = Ok(RecoveryAction::NodeReboot);
    gpu.row_remap_failure = Ok(true);
    gpu.row_remap_pending = Ok(true);
    let desired = step(&mut tracker, &node(vec![gpu], &[]), None, at(0));
    assert_eq!(
        get(&desired, GPU_XID_ERROR).reason,
        reason::DRIVER_RECOVERY_REASON
    );
    let memory = get(&desired, GPU_MEMORY_ERROR);
    assert_eq!(memory.reason, reason::ROW_REMAP_FAILURE_REASON);
    assert!(
        memory.message.contains("CONTACT_SUPPORT"),
        "{}",
        memory.message
    );
    assert!(
        !memory.message.contains("waits for a GPU reset"),
        "failure outranks pending"
    );
}

#[test]
fn unreadable_counters_are_named_but_unsupported_ones_are_not() {
    let mut tracker = Tracker::default();
    let mut gpu = GpuReading::healthy(0);
    gpu.retired_pages_pending = Err(Unreadable {
        query: "nvmlDeviceGetRetiredPagesPendingStatus",
        error: "NotSupported".into(),
    });
    gpu.volatile_dbe = Err(Unreadable {
        query: "nvmlDeviceGetTotalEccErrors(volatile)",
        error: "Unknown Error".into(),
    });
    let mut reading = node(vec![gpu], &[]);
    reading.xid_watch = Some(Unreadable {
        query: "nvmlDeviceRegisterEvents",
        error: "NoPermission".into(),
    });
    let desired = step(&mut tracker, &reading, None, at(0));
    let summary = get(&desired, GPU_HEALTHY);
    assert_eq!(summary.status, "True");
    assert!(
        summary
            .message
            .contains("GPU 0 nvmlDeviceGetTotalEccErrors(volatile): Unknown Error"),
        "{}",
        summary.message
    );
    assert!(
        summary
            .message
            .contains("XID events (nvmlDeviceRegisterEvents: NoPermission)"),
        "{}",
        summary.message
    );
    assert!(
        !summary.message.contains("RetiredPages"),
        "{}",
        summary.message
    );
}

#[test]
fn health_unknown_is_neither_healthy_nor_unhealthy() {
    let unknown = Desired::unknown("cannot load NVML from libnvidia-ml.so.1: not found");
    assert_eq!(unknown.status, "Unknown");
    assert_eq!(unknown.reason, HEALTH_UNKNOWN_REASON);
    assert!(unknown.message.contains("libnvidia-ml.so.1"));
}

#[test]
fn message_only_changes_wait_for_the_refresh_but_state_changes_do_not() {
    let old = NodeCondition {
        type_: GPU_XID_ERROR.into(),
        status: "True".into(),
        reason: Some(reason::XID_RESET_GPU_REASON.into()),
        message: Some("XID 48, 1 time".into()),
        last_heartbeat_time: Some(Time(at(0))),
        last_transition_time: Some(Time(at(0))),
    };
    let newer = Desired::new(
        GPU_XID_ERROR,
        "True",
        reason::XID_RESET_GPU_REASON,
        "XID 48, 2 times",
    );
    assert!(
        changed(
            std::slice::from_ref(&old),
            std::slice::from_ref(&newer),
            at(30)
        )
        .is_empty()
    );
    let written = changed(
        std::slice::from_ref(&old),
        std::slice::from_ref(&newer),
        at(61),
    );
    assert_eq!(written.len(), 1);
    assert_eq!(
        written[0].last_transition_time,
        Some(Time(at(0))),
        "the status did not flip"
    );
    let cleared = Desired::new(
        GPU_XID_ERROR,
        "False",
        reason::NO_XID_REASON,
        "no fault seen",
    );
    let written = changed(
        std::slice::from_ref(&old),
        std::slice::from_ref(&cleared),
        at(5),
    );
    assert_eq!(written[0].last_transition_time, Some(Time(at(5))));
}

#[test]
fn a_fault_appearing_and_clearing_makes_one_event_each_and_message_updates_none() {
    let mut tracker = Tracker::default();
    let mut on_node = Vec::new();
    let healthy = node(vec![GpuReading::healthy(0)], &[]);
    let first = changed(&on_node, &step(&mut tracker, &healthy, None, at(0)), at(0));
    assert!(
        transitions(&on_node, &first).is_empty(),
        "first report of a healthy node"
    );
    apply(&mut on_node, first);

    let mut bad = GpuReading::healthy(0);
    bad.row_remap_pending = Ok(true);
    let faulty = node(vec![bad], &[]);
    let written = changed(&on_node, &step(&mut tracker, &faulty, None, at(30)), at(30));
    let events = transitions(&on_node, &written);
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(events[0].warning);
    assert_eq!(events[0].reason, reason::ROW_REMAP_PENDING_REASON);
    assert!(
        events[0].note.starts_with("GPUMemoryError: GPU 0"),
        "{}",
        events[0].note
    );
    apply(&mut on_node, written);

    for poll in 0..CLEAR_AFTER {
        let now = at(60 + i64::from(poll) * 30);
        let written = changed(&on_node, &step(&mut tracker, &healthy, None, now), now);
        let events = transitions(&on_node, &written);
        if poll + 1 < CLEAR_AFTER {
            assert!(events.is_empty(), "poll {poll}: {events:?}");
        } else {
            assert_eq!(events.len(), 1);
            assert!(!events[0].warning);
            assert_eq!(events[0].reason, RECOVERED_REASON);
        }
        apply(&mut on_node, written);
    }
}
