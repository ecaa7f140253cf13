//! The states that wait or remove pods: jobs, GPU pod eviction, drain, driver restart and
//! validation, with their timeouts.

use gpu_operator_api::spec::{
    DrainSpec, DriverUpgradePolicySpec, PodDeletionSpec, WaitForCompletionSpec,
};

use super::*;

#[test]
fn jobs_are_waited_for_until_they_finish_or_the_timeout() {
    let p = policy(DriverUpgradePolicySpec {
        wait_for_completion: Some(WaitForCompletionSpec {
            pod_selector: Some("app=training".into()),
            timeout_seconds: Some(600),
        }),
        ..DriverUpgradePolicySpec::default()
    });
    let n = in_state("a", UpgradeState::WaitForJobsRequired);
    let mut job = gpu_pod("train-0");
    job.labels.insert("app".into(), "training".into());
    let s = step(&n, &p, false, std::slice::from_ref(&job), t(160));
    assert_eq!(s.patch.state, StateLabel::Keep);
    let wait = s.wait.unwrap();
    assert!(
        wait.reason.contains("ml/train-0") && wait.reason.contains("running for 1m"),
        "{}",
        wait.reason
    );
    assert!(s.evict.is_empty(), "jobs are waited for, not evicted");
    job.finished = true;
    let s = step(&n, &p, false, std::slice::from_ref(&job), t(160));
    assert_eq!(
        s.patch.state,
        StateLabel::Set(UpgradeState::PodDeletionRequired)
    );
    job.finished = false;
    let s = step(&n, &p, false, &[job], t(700));
    assert_eq!(
        s.patch.state,
        StateLabel::Set(UpgradeState::PodDeletionRequired),
        "NVIDIA goes on after the timeout"
    );
}

#[test]
fn gpu_pods_are_evicted_and_a_blocked_eviction_fails_at_the_timeout() {
    let p = policy(DriverUpgradePolicySpec::default());
    let n = in_state("a", UpgradeState::PodDeletionRequired);
    let cpu = Workload {
        gpu: false,
        ..gpu_pod("web")
    };
    let ds = Workload {
        daemonset: true,
        ..gpu_pod("gpu-ds")
    };
    let done = Workload {
        finished: true,
        ..gpu_pod("old-job")
    };
    let pods = [gpu_pod("infer"), cpu, ds, done];
    let s = step(&n, &p, false, &pods, t(110));
    assert_eq!(s.evict, [("ml".to_owned(), "infer".to_owned())]);
    assert_eq!(s.patch.state, StateLabel::Keep);
    // 300 s (NVIDIA's default) later it is still there (a PDB): failed, with the pod named.
    let s = step(&n, &p, false, &pods, t(400));
    assert_eq!(s.patch.state, StateLabel::Set(UpgradeState::Failed));
    let reason = s.patch.annotations[FAILURE_REASON].clone().unwrap();
    assert!(
        reason.contains("ml/infer") && reason.contains("300s"),
        "{reason}"
    );
    assert!(s.evict.is_empty());
    assert!(s.event.unwrap().warning);
}

#[test]
fn pods_without_controller_or_with_empty_dir_need_force_and_delete_empty_dir() {
    let n = in_state("a", UpgradeState::PodDeletionRequired);
    let bare = Workload {
        controlled: false,
        ..gpu_pod("bare")
    };
    let scratch = Workload {
        empty_dir: true,
        ..gpu_pod("scratch")
    };
    let strict = policy(DriverUpgradePolicySpec::default());
    for (pod, setting) in [
        (&bare, "gpuPodDeletion.force=true"),
        (&scratch, "gpuPodDeletion.deleteEmptyDir=true"),
    ] {
        let s = step(&n, &strict, false, std::slice::from_ref(pod), t(110));
        let reason = s.patch.annotations[FAILURE_REASON].clone().unwrap();
        assert!(
            reason.contains(&pod.key()) && reason.contains(setting),
            "{reason}"
        );
    }
    let lenient = policy(DriverUpgradePolicySpec {
        pod_deletion: Some(PodDeletionSpec {
            force: Some(true),
            delete_empty_dir: Some(true),
            timeout_seconds: Some(0),
            pod_selector: None,
        }),
        ..DriverUpgradePolicySpec::default()
    });
    let s = step(&n, &lenient, false, &[bare, scratch], t(100_000));
    assert_eq!(s.evict.len(), 2, "timeoutSeconds 0 waits forever");
}

#[test]
fn drain_takes_the_selected_pods_but_never_the_drain_skip_ones_or_daemonsets() {
    let p = policy(DriverUpgradePolicySpec {
        drain: Some(DrainSpec {
            enable: Some(true),
            pod_selector: Some("tier=web".into()),
            ..DrainSpec::default()
        }),
        ..DriverUpgradePolicySpec::default()
    });
    let n = in_state("a", UpgradeState::DrainRequired);
    let mut web = Workload {
        gpu: false,
        ..gpu_pod("web")
    };
    web.labels.insert("tier".into(), "web".into());
    let mut operator = web.clone();
    operator.name = "gpu-operator".into();
    operator
        .labels
        .insert(labels::DRIVER_UPGRADE_DRAIN_SKIP.into(), "true".into());
    let ds = Workload {
        daemonset: true,
        ..web.clone()
    };
    let other = Workload {
        gpu: false,
        ..gpu_pod("db")
    };
    let s = step(&n, &p, false, &[web, operator, ds, other], t(110));
    assert_eq!(s.evict, [("ml".to_owned(), "web".to_owned())]);
}

#[test]
fn the_restart_deletes_the_recorded_driver_pod_and_never_its_replacement() {
    let mut n = in_state("a", UpgradeState::PodRestartRequired);
    n.restart_pod = Some("old".into());
    let s = step(
        &n,
        &policy(DriverUpgradePolicySpec::default()),
        false,
        &[],
        t(110),
    );
    assert_eq!(
        s.delete,
        [("nvidia-driver-daemonset-old".to_owned(), "old".to_owned())]
    );
    // After an operator restart the replacement (in sync, not Ready yet) is left alone.
    n.driver = Some(driver("new", 105, true, false));
    let s = step(
        &n,
        &policy(DriverUpgradePolicySpec::default()),
        false,
        &[],
        t(110),
    );
    assert!(s.delete.is_empty() && s.patch.state == StateLabel::Keep);
    n.driver = Some(driver("new", 105, true, true));
    let s = step(
        &n,
        &policy(DriverUpgradePolicySpec::default()),
        false,
        &[],
        t(110),
    );
    assert_eq!(
        s.patch.state,
        StateLabel::Set(UpgradeState::ValidationRequired)
    );
}

#[test]
fn validation_needs_a_validator_started_on_the_new_driver_within_600s() {
    let p = policy(DriverUpgradePolicySpec::default());
    let mut n = in_state("a", UpgradeState::ValidationRequired);
    n.driver = Some(driver("new", 105, true, true));
    n.validator = Some(validator("v-old", 1, true));
    let s = step(&n, &p, false, &[], t(110));
    assert_eq!(
        s.delete,
        [(
            "nvidia-operator-validator-v-old".to_owned(),
            "v-old".to_owned()
        )]
    );
    n.validator = Some(validator("v-new", 107, false));
    let s = step(&n, &p, false, &[], t(110));
    assert_eq!(s.patch.state, StateLabel::Keep);
    let s = step(&n, &p, false, &[], t(701));
    let reason = s.patch.annotations[FAILURE_REASON].clone().unwrap();
    assert!(
        reason.contains("nvidia-operator-validator-v-new") && reason.contains("not Ready"),
        "{reason}"
    );
    n.validator = Some(validator("v-new", 107, true));
    let s = step(&n, &p, false, &[], t(110));
    assert_eq!(
        s.patch.state,
        StateLabel::Set(UpgradeState::UncordonRequired)
    );
}

#[test]
fn every_gpu_user_is_found_and_the_ones_eviction_cannot_move_are_named() {
    let p = policy(DriverUpgradePolicySpec::default()).with_gpu_users(
        &gpu_operator_api::ClusterPolicySpec::default(),
        "gpu-operator",
    );
    let n = in_state("a", UpgradeState::PodDeletionRequired);
    // A pod under the NVIDIA runtime class requests no GPU but uses them: it is evicted.
    let runtime = Workload {
        gpu: false,
        runtime_class: Some("nvidia".into()),
        ..gpu_pod("render")
    };
    let other_runtime = Workload {
        gpu: false,
        runtime_class: Some("kata".into()),
        ..gpu_pod("sandboxed")
    };
    let s = step(
        &n,
        &p,
        false,
        &[runtime.clone(), other_runtime.clone()],
        t(110),
    );
    assert_eq!(s.evict, [("ml".to_owned(), "render".to_owned())]);
    // A DaemonSet GPU user (a standalone exporter) is not evicted, and the move to the restart
    // names it in a Warning Event.
    let exporter = Workload {
        gpu: false,
        daemonset: true,
        runtime_class: Some("nvidia-cdi".into()),
        ..gpu_pod("dcgm-exporter-x")
    };
    // The operator's own pods (operands, the validator's CUDA workload) are the driver manager's
    // to move: neither evicted nor named.
    let operand = Workload {
        namespace: "gpu-operator".into(),
        daemonset: true,
        runtime_class: Some("nvidia".into()),
        ..gpu_pod("nvidia-device-plugin-daemonset-x")
    };
    let workload = Workload {
        namespace: "gpu-operator".into(),
        controlled: false,
        runtime_class: Some("nvidia".into()),
        ..gpu_pod("nvidia-cuda-validator-x")
    };
    let s = step(&n, &p, false, &[operand, workload], t(110));
    assert_eq!(
        (s.patch.state, s.event.as_ref().map(|e| e.reason)),
        (StateLabel::Set(UpgradeState::PodRestartRequired), None)
    );
    // Until gpuPodDeletion.timeoutSeconds (300 s) the node waits, naming it and the fix.
    let s = step(
        &n,
        &p,
        false,
        &[exporter.clone(), other_runtime.clone()],
        t(110),
    );
    assert_eq!(s.patch.state, StateLabel::Keep);
    let wait = s.wait.unwrap();
    assert!(wait.stuck);
    assert!(
        wait.reason
            .contains("1 DaemonSet pod(s) hold the GPU and eviction does not move them: ml/dcgm-exporter-x (runtime class nvidia-cdi)")
            && wait.reason.contains("nvidia.com/gpu.deploy.client: \"true\"")
            && wait.reason.contains("without them after 300s"),
        "{}",
        wait.reason
    );
    let s = step(&n, &p, false, &[exporter, other_runtime], t(401));
    assert_eq!(
        s.patch.state,
        StateLabel::Set(UpgradeState::PodRestartRequired)
    );
    let event = s.event.unwrap();
    assert!(event.warning);
    assert_eq!(event.reason, "DriverUpgradeGpuUsersRemain");
    assert!(
        event.note.contains("1 DaemonSet pod(s) still use the GPU")
            && event
                .note
                .contains("ml/dcgm-exporter-x (runtime class nvidia-cdi)"),
        "{}",
        event.note
    );
    // Without one, no Event.
    let s = step(&n, &p, false, &[], t(110));
    assert_eq!(s.event, None);
}
