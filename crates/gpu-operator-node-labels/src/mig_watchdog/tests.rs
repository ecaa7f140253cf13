//! The watchdog on label sets as NVIDIA's MIG manager leaves them: timed from the first look,
//! stuck past the timeout (and not before), failed at once, recovery due once per layout until
//! `success`, the stuck mark and the restored deploy labels as label changes.

use gpu_operator_api::{
    ClusterPolicySpec,
    spec::{MigManagerSpec, MigRecovery, MigWatchdogSpec},
};

use super::*;

fn node(layout: &str, state: &str) -> BTreeMap<String, String> {
    [
        (labels::MIG_CONFIG, layout),
        (labels::MIG_CONFIG_STATE, state),
        ("nvidia.com/gpu.deploy.device-plugin", PAUSED_FOR_MIG_CHANGE),
        ("nvidia.com/gpu.deploy.dcgm", "false"),
        ("nvidia.com/gpu.deploy.driver", "true"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

fn policy(timeout: u32, recovery: MigRecovery) -> ClusterPolicySpec {
    ClusterPolicySpec {
        mig_manager: Some(MigManagerSpec {
            watchdog: Some(MigWatchdogSpec {
                timeout_seconds: Some(timeout),
                recovery: Some(recovery),
            }),
            ..MigManagerSpec::default()
        }),
        ..ClusterPolicySpec::default()
    }
}

#[test]
fn pending_is_timed_and_stuck_only_past_the_timeout() {
    let watch = MigWatch::default();
    let policy = policy(60, MigRecovery::Report);
    let start = Instant::now();
    let pending = node("all-1g.10gb", "pending");
    let first = watch.observe("n", &pending, &policy, start);
    assert_eq!(first.trouble, None);
    assert_eq!(first.recheck_in, Some(Duration::from_secs(60)));
    let later = watch.observe("n", &pending, &policy, start + Duration::from_secs(59));
    assert_eq!(later.trouble, None);
    assert_eq!(later.recheck_in, Some(Duration::from_secs(1)));

    let stuck = watch.observe("n", &pending, &policy, start + Duration::from_secs(61));
    let trouble = stuck.trouble.clone().unwrap();
    assert!(trouble.stuck() && trouble.new && trouble.recover);
    assert_eq!(trouble.for_, Duration::from_secs(61));
    assert_eq!(
        label_changes(&pending, &stuck, &policy),
        BTreeMap::from([(labels::MIG_STUCK.to_owned(), Some("pending".to_owned()))]),
        "report only: the mark, nothing restored"
    );
    let again = watch.observe("n", &pending, &policy, start + Duration::from_secs(90));
    let trouble = again.trouble.unwrap();
    assert!(!trouble.new && !trouble.recover, "said and recovered once");

    // Progress restarts the clock; the mark goes.
    let mut rebooting = node("all-1g.10gb", "rebooting");
    rebooting.insert(labels::MIG_STUCK.to_owned(), "pending".to_owned());
    let moved = watch.observe("n", &rebooting, &policy, start + Duration::from_secs(91));
    assert_eq!(moved.trouble, None);
    assert_eq!(
        label_changes(&rebooting, &moved, &policy),
        BTreeMap::from([(labels::MIG_STUCK.to_owned(), None)])
    );
}

#[test]
fn failed_is_trouble_at_once_and_recovered_once_per_layout() {
    let watch = MigWatch::default();
    let policy = policy(1800, MigRecovery::Retry);
    let now = Instant::now();
    let failed = node("all-1g.10gb", "failed");
    let trouble = watch.observe("n", &failed, &policy, now).trouble.unwrap();
    assert!(!trouble.stuck() && trouble.new && trouble.recover);
    // The retry runs the MIG manager again: pending, then failed again: no second retry.
    watch.observe("n", &node("all-1g.10gb", "pending"), &policy, now);
    let again = watch.observe("n", &failed, &policy, now).trouble.unwrap();
    assert!(again.new, "a new failure is said");
    assert!(!again.recover, "but the layout is retried once");
    // Another layout may be recovered again; so may the same after a success.
    let other = watch
        .observe("n", &node("all-2g.20gb", "failed"), &policy, now)
        .trouble
        .unwrap();
    assert!(other.recover);
    watch.observe("n", &node("all-2g.20gb", "success"), &policy, now);
    let after_success = watch
        .observe("n", &node("all-2g.20gb", "failed"), &policy, now)
        .trouble
        .unwrap();
    assert!(after_success.recover);
    assert_eq!(
        label_changes(&failed, &Finding::default(), &policy),
        BTreeMap::new(),
        "a failed node carries no stuck mark"
    );
}

#[test]
fn restore_clients_sets_only_the_paused_deploy_labels_back() {
    let watch = MigWatch::default();
    let policy = policy(1800, MigRecovery::RestoreClients);
    let failed = node("all-1g.10gb", "failed");
    let finding = watch.observe("n", &failed, &policy, Instant::now());
    assert_eq!(
        label_changes(&failed, &finding, &policy),
        BTreeMap::from([(
            "nvidia.com/gpu.deploy.device-plugin".to_owned(),
            Some("true".to_owned())
        )]),
        "false stays false; the driver is not the MIG manager's to pause"
    );
    // Positive control: report only leaves the pause.
    let report = policy_with(MigRecovery::Report);
    assert!(label_changes(&failed, &finding, &report).is_empty());
}

fn policy_with(recovery: MigRecovery) -> ClusterPolicySpec {
    policy(1800, recovery)
}

#[test]
fn success_and_no_state_are_never_trouble_and_the_defaults_hold() {
    let watch = MigWatch::default();
    let policy = ClusterPolicySpec::default();
    for state in ["success", ""] {
        assert_eq!(
            watch.observe("n", &node("all-1g.10gb", state), &policy, Instant::now()),
            Finding::default()
        );
    }
    assert_eq!(recovery(&policy), MigRecovery::Retry);
    let first = watch.observe("n", &node("x", "pending"), &policy, Instant::now());
    assert_eq!(first.recheck_in, Some(Duration::from_secs(1800)));
}
