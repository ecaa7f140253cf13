//! Tests of the pure condition logic: stack derivation, merge, transition times, the patch body.

use gpu_operator_api::{conditions::node, validator::reason};
use k8s_openapi::{
    api::core::v1::NodeCondition, apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp,
};

use super::*;

fn at(second: i64) -> Time {
    Time(Timestamp::from_second(second).unwrap())
}

fn condition(type_: &str, status: &str, reason: &str, message: &str, since: i64) -> NodeCondition {
    NodeCondition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: Some(reason.to_owned()),
        message: Some(message.to_owned()),
        last_heartbeat_time: Some(at(since)),
        last_transition_time: Some(at(since)),
    }
}

fn kubelet_ready() -> NodeCondition {
    condition(
        "Ready",
        "True",
        "KubeletReady",
        "kubelet is posting ready status",
        1,
    )
}

fn all_green() -> Vec<NodeCondition> {
    vec![
        kubelet_ready(),
        condition(
            node::GPU_DRIVER_READY,
            "True",
            reason::DRIVER_VALIDATED,
            "driver 570.172.08, 8 GPUs",
            10,
        ),
        condition(
            node::GPU_TOOLKIT_READY,
            "True",
            reason::TOOLKIT_VALIDATED,
            "ok",
            10,
        ),
        condition(
            node::GPU_DEVICE_PLUGIN_READY,
            "True",
            reason::DEVICE_PLUGIN_VALIDATED,
            "ok",
            10,
        ),
    ]
}

#[test]
fn stack_is_ready_when_everything_passed() {
    let s = stack(&all_green(), None, &Cuda::Passed);
    assert!(s.ready);
    assert_eq!(s.type_, node::GPU_STACK_READY);
    assert_eq!(s.reason, reason::STACK_READY);
    assert!(
        s.message.contains("driver 570.172.08, 8 GPUs"),
        "{}",
        s.message
    );
}

#[test]
fn stack_names_the_first_failure_in_order() {
    let own = Desired::new(
        node::GPU_DRIVER_READY,
        false,
        reason::DRIVER_NOT_LOADED,
        "module missing",
    );
    let s = stack(&all_green(), Some(&own), &Cuda::Passed);
    assert!(!s.ready);
    assert_eq!(s.reason, reason::DRIVER_NOT_READY);
    assert_eq!(
        s.message,
        "GPUDriverReady failed (DriverNotLoaded): module missing"
    );

    let s = stack(
        &all_green(),
        None,
        &Cuda::Failed(reason::CUDA_IMAGE_NOT_CONFIGURED.into(), "no image".into()),
    );
    assert_eq!(s.reason, reason::CUDA_NOT_READY);
    assert!(s.message.contains("CUDAImageNotConfigured") && s.message.contains("no image"));
}

#[test]
fn stack_lists_what_is_pending() {
    let s = stack(&[kubelet_ready()], None, &Cuda::Unknown);
    assert_eq!(s.reason, reason::VALIDATION_PENDING);
    assert_eq!(
        s.message,
        "not validated yet: GPUDriverReady, GPUToolkitReady, the CUDA check, GPUDevicePluginReady"
    );
    let own = Desired::new(node::GPU_DRIVER_READY, true, reason::DRIVER_VALIDATED, "ok");
    let s = stack(&[], Some(&own), &Cuda::Unknown);
    assert!(
        s.message
            .ends_with("GPUToolkitReady, the CUDA check, GPUDevicePluginReady")
    );
}

#[test]
fn merge_writes_only_what_changed_and_never_kubelets_conditions() {
    let existing = all_green();
    let same = Desired::new(
        node::GPU_TOOLKIT_READY,
        true,
        reason::TOOLKIT_VALIDATED,
        "ok",
    );
    assert!(
        merge(&existing, &[same], &at(100)).is_empty(),
        "nothing changed: no patch"
    );

    let flipped = Desired::new(
        node::GPU_TOOLKIT_READY,
        false,
        reason::NVIDIA_SMI_NOT_INJECTED,
        "no nvidia-smi",
    );
    let changed = merge(&existing, &[flipped], &at(100));
    assert_eq!(changed.len(), 1);
    assert_eq!(changed[0].type_, node::GPU_TOOLKIT_READY);
    assert_eq!(changed[0].status, "False");
    assert_eq!(
        changed[0].last_transition_time,
        Some(at(100)),
        "status flipped"
    );
    assert_eq!(changed[0].last_heartbeat_time, Some(at(100)));
    assert!(changed.iter().all(|c| c.type_ != "Ready"));
}

#[test]
fn a_new_message_keeps_the_transition_time() {
    let existing = all_green();
    let reworded = Desired::new(
        node::GPU_DRIVER_READY,
        true,
        reason::DRIVER_VALIDATED,
        "driver 580.65.06, 8 GPUs",
    );
    let changed = merge(&existing, &[reworded], &at(200));
    assert_eq!(changed.len(), 1);
    assert_eq!(
        changed[0].last_transition_time,
        Some(at(10)),
        "status did not flip"
    );
    assert_eq!(changed[0].last_heartbeat_time, Some(at(200)));
}

#[test]
fn a_first_condition_transitions_now() {
    let d = Desired::new(
        node::GPU_DRIVER_READY,
        false,
        reason::DRIVER_NOT_FOUND,
        "none",
    );
    let changed = merge(&[kubelet_ready()], &[d], &at(300));
    assert_eq!(changed[0].last_transition_time, Some(at(300)));
    assert_eq!(changed[0].reason.as_deref(), Some(reason::DRIVER_NOT_FOUND));
}

#[test]
fn an_unknown_condition_counts_as_pending() {
    let mut existing = all_green();
    existing[1].status = "Unknown".into();
    let s = stack(&existing, None, &Cuda::Passed);
    assert_eq!(s.reason, reason::VALIDATION_PENDING);
}

#[test]
fn the_patch_carries_the_resource_version_and_only_our_conditions() {
    let d = Desired::new(node::GPU_DRIVER_READY, true, reason::DRIVER_VALIDATED, "ok");
    let changed = merge(&[], &[d], &at(5));
    let body = patch_body(&changed, "4711");
    assert_eq!(body["metadata"]["resourceVersion"], "4711");
    let conditions = body["status"]["conditions"].as_array().unwrap();
    assert_eq!(conditions.len(), 1);
    assert_eq!(conditions[0]["type"], "GPUDriverReady");
    assert_eq!(conditions[0]["status"], "True");
    assert_eq!(conditions[0]["lastTransitionTime"], "1970-01-01T00:00:05Z");
}

#[test]
fn long_messages_are_cut() {
    let d = Desired::new(
        node::GPU_DRIVER_READY,
        false,
        reason::DRIVER_QUERY_FAILED,
        &"é".repeat(2000),
    );
    assert!(d.message.len() <= MAX_MESSAGE + '…'.len_utf8());
    assert!(d.message.ends_with('…'));
}
