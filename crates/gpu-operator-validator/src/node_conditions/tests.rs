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
    let s = stack(&all_green(), None, CudaFile::Ready);
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
    let s = stack(&all_green(), Some(&own), CudaFile::Ready);
    assert!(!s.ready);
    assert_eq!(s.reason, reason::DRIVER_NOT_READY);
    assert_eq!(
        s.message,
        "GPUDriverReady failed (DriverNotLoaded): module missing"
    );

    let cuda = Desired::new(
        node::GPU_CUDA_READY,
        false,
        reason::CUDA_IMAGE_NOT_CONFIGURED,
        "no image",
    );
    // This run's CUDA failure wins over a `cuda-ready` file of an earlier pass.
    let s = stack(&all_green(), Some(&cuda), CudaFile::Ready);
    assert_eq!(s.reason, reason::CUDA_NOT_READY);
    assert_eq!(
        s.message,
        "GPUCudaReady failed (CUDAImageNotConfigured): no image"
    );
}

#[test]
fn the_cuda_condition_on_the_node_counts_and_the_file_stands_in_for_an_earlier_release() {
    let mut existing = all_green();
    existing.push(condition(
        node::GPU_CUDA_READY,
        "False",
        reason::WORKLOAD_FAILED,
        "vectorAdd exited 2",
        10,
    ));
    let s = stack(&existing, None, CudaFile::Ready);
    assert_eq!(s.reason, reason::CUDA_NOT_READY);
    assert!(s.message.contains("vectorAdd exited 2"), "{}", s.message);
    // No GPUCudaReady (written by an earlier release): the status file says whether it passed.
    assert!(stack(&all_green(), None, CudaFile::Ready).ready);
    let s = stack(&all_green(), None, CudaFile::Absent);
    assert_eq!(s.reason, reason::VALIDATION_PENDING);
    assert_eq!(s.message, "not validated yet: GPUCudaReady");
}

#[test]
fn stack_lists_what_is_pending() {
    let s = stack(&[kubelet_ready()], None, CudaFile::Absent);
    assert_eq!(s.reason, reason::VALIDATION_PENDING);
    assert_eq!(
        s.message,
        "not validated yet: GPUDriverReady, GPUToolkitReady, GPUCudaReady, GPUDevicePluginReady"
    );
    let own = Desired::new(node::GPU_DRIVER_READY, true, reason::DRIVER_VALIDATED, "ok");
    let s = stack(&[], Some(&own), CudaFile::Absent);
    assert!(
        s.message
            .ends_with("GPUToolkitReady, GPUCudaReady, GPUDevicePluginReady")
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
    let s = stack(&existing, None, CudaFile::Ready);
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
    assert!(d.message.len() <= MAX_MESSAGE);
    assert!(d.message.ends_with("..."));
}

#[test]
fn a_sandbox_run_writes_only_its_own_condition() {
    let own = Desired::new(
        "GPUVfioPciReady",
        false,
        "GPUNotBoundToVfio",
        "NVIDIA GPUs not bound to vfio-pci (1 of 1)",
    );
    let only = desired(&all_green(), &own, Scope::OwnOnly);
    assert_eq!(only.len(), 1);
    assert_eq!(only[0], own);
    // The container stack's rule, for contrast: GPUStackReady comes along.
    let driver = Desired::new("GPUDriverReady", true, "DriverValidated", "driver 570");
    let with_stack = desired(&all_green(), &driver, Scope::WithStack(CudaFile::Ready));
    let types: Vec<_> = with_stack.iter().map(|d| d.type_).collect();
    assert_eq!(types, ["GPUDriverReady", "GPUStackReady"]);
    assert!(with_stack[1].ready);
}
