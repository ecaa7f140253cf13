//! Every GPU user leaves before the driver restarts: the client label paused and restored, DRA
//! claims and `podDeletion.podSelector` pods evicted.

use gpu_operator_api::spec::PodDeletionSpec;

use super::*;

const PAUSED: &str = "paused-for-driver-upgrade";

fn with_client(state: UpgradeState) -> NodeFacts {
    NodeFacts {
        client: Some("true".into()),
        ..in_state("a", state)
    }
}

/// A DaemonSet's pod whose nodeSelector names `nvidia.com/gpu.deploy.client`.
fn client_pod() -> Workload {
    Workload {
        gpu: false,
        daemonset: true,
        client: true,
        ..gpu_pod("profiler-x")
    }
}

#[test]
fn the_client_label_is_paused_until_its_pods_leave_and_restored_when_the_upgrade_ends() {
    let p = policy(DriverUpgradePolicySpec::default());
    let mut n = with_client(UpgradeState::PodDeletionRequired);
    let s = step(&n, &p, false, &[client_pod()], t(104));
    assert_eq!(s.patch.client, Some(PAUSED));
    assert_eq!(s.patch.state, StateLabel::Keep, "its pod is still there");
    let wait = s.wait.clone().unwrap();
    assert!(
        wait.reason.contains("1 GPU client pod(s) to leave")
            && wait.reason.contains("ml/profiler-x"),
        "{}",
        wait.reason
    );
    assert!(
        !wait.stuck && s.evict.is_empty(),
        "its DaemonSet removes it"
    );
    apply(&mut n, &s, 104);
    assert_eq!(n.client.as_deref(), Some(PAUSED));
    // Gone: the node moves to the restart, the label stays paused.
    let s = step(&n, &p, false, &[], t(115));
    assert_eq!(
        (s.patch.state, s.patch.client),
        (StateLabel::Set(UpgradeState::PodRestartRequired), None)
    );
    // The walk from there ends with the label `true` again.
    n.state = Some(UpgradeState::PodRestartRequired);
    let (_, done) = walk(n, &p, &[]);
    assert_eq!(done.state, Some(UpgradeState::Done));
    assert_eq!(done.client.as_deref(), Some("true"));
}

#[test]
fn a_whole_upgrade_pauses_the_clients_once_and_a_restart_in_place_never() {
    let p = policy(DriverUpgradePolicySpec::default());
    let (_, done) = walk(
        NodeFacts {
            client: Some("true".into()),
            ..node("a")
        },
        &p,
        &[],
    );
    assert_eq!(done.client.as_deref(), Some("true"));
    // A label the MIG manager paused, or a user set to false, is not the upgrade's to touch.
    for value in ["paused-for-mig-change", "false"] {
        let n = NodeFacts {
            client: Some(value.into()),
            ..in_state("a", UpgradeState::PodDeletionRequired)
        };
        let s = step(&n, &p, false, &[], t(110));
        assert_eq!(s.patch.client, None, "{value}");
    }
    let mut refresh = NodeFacts {
        client: Some("true".into()),
        ..node("a")
    };
    refresh.driver.as_mut().unwrap().in_sync = true;
    refresh.driver.as_mut().unwrap().older_template = true;
    let mut n = refresh;
    for i in 1..10 {
        let admitted = admit(std::slice::from_ref(&n), &p).contains(&n.name);
        let s = step(&n, &p, admitted, &[], t(1000 + i));
        assert_eq!(s.patch.client, None, "a restart in place unloads nothing");
        apply(&mut n, &s, 1000 + i);
    }
}

#[test]
fn client_pods_that_do_not_leave_fail_the_node_and_the_label_comes_back() {
    let p = policy(DriverUpgradePolicySpec::default());
    let n = NodeFacts {
        client: Some(PAUSED.into()),
        ..in_state("a", UpgradeState::PodDeletionRequired)
    };
    let s = step(&n, &p, false, &[client_pod()], t(401));
    assert_eq!(s.patch.state, StateLabel::Set(UpgradeState::Failed));
    assert_eq!(s.patch.client, Some("true"));
    let reason = s.patch.annotations[FAILURE_REASON].clone().unwrap();
    assert!(
        reason.contains("selecting nvidia.com/gpu.deploy.client") && reason.contains("profiler-x"),
        "{reason}"
    );
    // A node that fails in the pass that would pause the label never pauses it.
    let bare = Workload {
        controlled: false,
        ..gpu_pod("bare")
    };
    let s = step(
        &with_client(UpgradeState::PodDeletionRequired),
        &p,
        false,
        &[bare],
        t(110),
    );
    assert_eq!(
        (s.patch.state, s.patch.client),
        (StateLabel::Set(UpgradeState::Failed), None)
    );
    // Automatic upgrades turned off hand the label back too.
    let released = release(&NodeFacts {
        client: Some(PAUSED.into()),
        ..in_state("a", UpgradeState::PodRestartRequired)
    })
    .unwrap();
    assert_eq!(released.client, Some("true"));
}

#[test]
fn dra_claims_and_the_policy_selector_find_gpu_users_that_request_nothing() {
    let p = policy(DriverUpgradePolicySpec {
        pod_deletion: Some(PodDeletionSpec {
            pod_selector: Some("app=vllm".into()),
            ..PodDeletionSpec::default()
        }),
        ..DriverUpgradePolicySpec::default()
    });
    let n = in_state("a", UpgradeState::PodDeletionRequired);
    let claim = Workload {
        gpu: false,
        claims: vec!["infer-gpu".into()],
        dra_claim: Some("infer-gpu".into()),
        ..gpu_pod("infer")
    };
    let unclaimed = Workload {
        dra_claim: None,
        name: "nic-user".into(),
        ..claim.clone()
    };
    let vllm = Workload {
        gpu: false,
        labels: [("app".to_owned(), "vllm".to_owned())].into(),
        ..gpu_pod("vllm-0")
    };
    let s = step(&n, &p, false, &[claim, unclaimed, vllm], t(110));
    assert_eq!(
        s.evict,
        [
            ("ml".to_owned(), "infer".to_owned()),
            ("ml".to_owned(), "vllm-0".to_owned())
        ]
    );
}
