//! The status batch: what a request carries and when it goes.
use gpu_operator_api::{ClusterPolicy, ClusterPolicyStatus, conditions};

use super::*;

fn condition(type_: &str, status: &str) -> Condition {
    Condition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        ),
        message: String::new(),
        observed_generation: None,
        reason: "Test".to_owned(),
    }
}

fn policy(live: Vec<Condition>) -> ClusterPolicy {
    let mut policy = ClusterPolicy::new("p", gpu_operator_api::ClusterPolicySpec::default());
    policy.metadata.uid = Some("u".to_owned());
    policy.status = Some(ClusterPolicyStatus {
        conditions: Some(live),
        ..ClusterPolicyStatus::default()
    });
    policy
}

fn types(conditions: &[Condition]) -> Vec<(&str, &str)> {
    conditions
        .iter()
        .map(|c| (c.type_.as_str(), c.status.as_str()))
        .collect()
}

#[test]
fn the_first_condition_opens_a_batch_and_the_rest_join_it() {
    let batch = StatusBatch::default();
    let policy = policy(Vec::new());
    assert_eq!(
        batch.enqueue(&policy, vec![condition("AReady", "False")], None),
        Turn::Send
    );
    assert_eq!(
        batch.enqueue(&policy, vec![condition("BReady", "True")], None),
        Turn::Queued
    );
    assert_eq!(
        batch.enqueue(&policy, vec![condition("AReady", "True")], None),
        Turn::Queued
    );
    let sent = batch.take_raw("u").unwrap();
    assert_eq!(
        types(&sent.conditions),
        [("AReady", "True"), ("BReady", "True")]
    );
    // Nothing new: the batch closes, and the next condition opens another.
    assert!(batch.take_raw("u").is_none());
    assert_eq!(
        batch.enqueue(&policy, vec![condition("BReady", "False")], None),
        Turn::Send
    );
}

#[test]
fn a_condition_that_comes_while_sending_goes_in_a_second_request_with_the_first() {
    let batch = StatusBatch::default();
    let policy = policy(Vec::new());
    batch.enqueue(&policy, vec![condition("AReady", "True")], None);
    assert_eq!(
        types(&batch.take_raw("u").unwrap().conditions),
        [("AReady", "True")]
    );
    assert_eq!(
        batch.enqueue(&policy, vec![condition("BReady", "True")], None),
        Turn::Queued
    );
    // Server-side apply keeps only what each request carries: both, again.
    assert_eq!(
        types(&batch.take_raw("u").unwrap().conditions),
        [("AReady", "True"), ("BReady", "True")]
    );
    assert!(batch.take_raw("u").is_none());
}

#[test]
fn everything_live_this_process_has_not_sent_yet_is_carried() {
    let batch = StatusBatch::default();
    let live = vec![
        condition(conditions::READY, "True"),
        condition(conditions::ERROR, "False"),
        condition("AReady", "True"),
        condition("BReady", "False"),
    ];
    let mut policy = policy(live);
    if let Some(status) = policy.status.as_mut() {
        status.state = gpu_operator_api::State::Ready;
        status.namespace = Some("gpu-operator".to_owned());
    }
    batch.enqueue(&policy, vec![condition("BReady", "True")], None);
    let sent = batch.take_raw("u").unwrap();
    assert_eq!(
        types(&sent.conditions),
        [
            ("AReady", "True"),
            ("BReady", "True"),
            (conditions::ERROR, "False"),
            (conditions::READY, "True")
        ]
    );
    assert_eq!(
        Value::Object(sent.fields),
        json!({"state": "ready", "namespace": "gpu-operator"})
    );
}

#[test]
fn the_overall_status_joins_the_conditions_and_is_carried_on() {
    let batch = StatusBatch::default();
    let policy = policy(vec![condition(conditions::READY, "False")]);
    let overall = Overall {
        fields: json!({"state": "ready"}).as_object().cloned().unwrap(),
        conditions: vec![condition(conditions::READY, "True")],
    };
    batch.enqueue(
        &policy,
        overall.conditions.clone(),
        Some(overall.fields.clone()),
    );
    batch.enqueue(&policy, vec![condition("AReady", "True")], None);
    let sent = batch.take_raw("u").unwrap();
    assert_eq!(
        types(&sent.conditions),
        [("AReady", "True"), (conditions::READY, "True")]
    );
    assert_eq!(Value::Object(sent.fields), json!({"state": "ready"}));
    batch.enqueue(&policy, vec![condition("AReady", "False")], None);
    let next = batch.take_raw("u").unwrap();
    assert_eq!(Value::Object(next.fields), json!({"state": "ready"}));
    assert_eq!(
        types(&next.conditions),
        [("AReady", "False"), (conditions::READY, "True")]
    );
}

#[test]
fn the_kinds_summarizer_finds_the_overall_status_from_the_outgoing_conditions() {
    let batch = StatusBatch::default();
    let policy = policy(vec![condition(conditions::READY, "False")]);
    // Ready when every other condition is True; leaves it alone otherwise.
    let summarize: Summarizer<ClusterPolicy> = Arc::new(|_, outgoing: Outgoing<'_>| {
        outgoing
            .conditions
            .iter()
            .filter(|c| c.type_ != conditions::READY)
            .all(|c| c.status == "True")
            .then(|| Overall {
                fields: json!({"state": "ready"})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
                conditions: vec![condition(conditions::READY, "True")],
            })
    });
    batch.summarize_with(summarize);
    batch.enqueue(&policy, vec![condition("AReady", "False")], None);
    let sent = batch.take::<ClusterPolicy>("u").unwrap();
    assert_eq!(
        types(&sent.conditions),
        [("AReady", "False"), (conditions::READY, "False")],
        "left alone"
    );
    let live_state = json!(policy.status.as_ref().map(|s| s.state));
    assert_eq!(
        Value::Object(sent.fields),
        json!({"state": live_state}),
        "as live"
    );
    batch.enqueue(&policy, vec![condition("AReady", "True")], None);
    let sent = batch.take::<ClusterPolicy>("u").unwrap();
    assert_eq!(
        types(&sent.conditions),
        [("AReady", "True"), (conditions::READY, "True")],
        "the operand's condition and the overall status it makes ready, in one request"
    );
    assert_eq!(Value::Object(sent.fields), json!({"state": "ready"}));
    // Another kind has no summarizer: its batch goes as it is.
    assert!(
        batch
            .summarizer::<crate::pipeline::test_pool::Pool>()
            .is_none()
    );
}

#[test]
fn a_failed_request_leaves_its_conditions_for_the_next() {
    let batch = StatusBatch::default();
    let policy = policy(Vec::new());
    batch.enqueue(&policy, vec![condition("AReady", "True")], None);
    batch.take_raw("u").unwrap();
    batch.failed("u");
    // The sender tries again: the next condition joins, and both go.
    assert_eq!(
        batch.enqueue(&policy, vec![condition("BReady", "True")], None),
        Turn::Queued
    );
    assert_eq!(
        types(&batch.take_raw("u").unwrap().conditions),
        [("AReady", "True"), ("BReady", "True")]
    );
}

#[test]
fn policies_batch_apart() {
    let batch = StatusBatch::default();
    let first = policy(Vec::new());
    let mut second = policy(Vec::new());
    second.metadata.uid = Some("v".to_owned());
    assert_eq!(
        batch.enqueue(&first, vec![condition("AReady", "True")], None),
        Turn::Send
    );
    assert_eq!(
        batch.enqueue(&second, vec![condition("AReady", "True")], None),
        Turn::Send
    );
}

#[test]
fn another_owner_kind_batches_alike() {
    use crate::pipeline::test_pool::Pool;
    let batch = StatusBatch::default();
    let mut pool = Pool::new("a", "p1", Some("550"));
    pool.conditions = Some(vec![
        condition("Ready", "False"),
        condition("DriverReady", "False"),
    ]);
    assert_eq!(
        batch.enqueue(&pool, vec![condition("UpgradeReady", "True")], None),
        Turn::Send
    );
    assert_eq!(
        types(&batch.take_raw("p1").unwrap().conditions),
        [
            ("DriverReady", "False"),
            ("Ready", "False"),
            ("UpgradeReady", "True")
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_burst_is_sent_once_quiet_and_no_later_than_the_longest_wait() {
    let batch = StatusBatch::default();
    let policy = policy(Vec::new());
    let start = Instant::now();
    batch.enqueue(&policy, vec![condition("AReady", "True")], None);
    assert_eq!(batch.quiet_in("u", start), Some(WINDOW));
    tokio::time::advance(Duration::from_millis(200)).await;
    batch.enqueue(&policy, vec![condition("BReady", "True")], None);
    assert_eq!(
        batch.quiet_in("u", Instant::now()),
        Some(WINDOW),
        "a straggler restarts the quiet window"
    );
    assert_eq!(batch.quiet_in("u", Instant::now() + WINDOW), None);
    // A stream that never falls quiet is sent LONGEST after it began.
    tokio::time::advance(Duration::from_millis(1700)).await;
    batch.enqueue(&policy, vec![condition("AReady", "False")], None);
    assert_eq!(
        batch.quiet_in("u", Instant::now()),
        Some(Duration::from_millis(100))
    );
    assert_eq!(batch.quiet_in("u", start + LONGEST), None);
    batch.take_raw("u").unwrap();
    assert_eq!(batch.quiet_in("u", Instant::now()), None, "nothing waits");
}

fn acknowledging(type_: &str, generation: i64) -> Condition {
    Condition {
        observed_generation: Some(generation),
        ..condition(type_, "True")
    }
}

#[tokio::test(start_paused = true)]
async fn a_new_generation_waits_for_every_reconciler_to_acknowledge_it() {
    let batch = StatusBatch::default();
    let policy = policy(Vec::new());
    // Generation 1, acknowledged by both reconcilers.
    batch.enqueue(&policy, vec![acknowledging("AReady", 1)], None);
    batch.enqueue(&policy, vec![acknowledging("BReady", 1)], None);
    batch.take_raw("u").unwrap();
    // Generation 2: A acknowledges it first; B is late.
    let start = Instant::now();
    batch.enqueue(&policy, vec![acknowledging("AReady", 2)], None);
    assert_eq!(
        batch.quiet_in("u", start + LONGEST),
        Some(WINDOW),
        "past the longest wait, still waiting for B, looking again every window"
    );
    assert_eq!(
        batch.quiet_in("u", start + ACKNOWLEDGED - Duration::from_millis(100)),
        Some(Duration::from_millis(100))
    );
    assert_eq!(
        batch.quiet_in("u", start + ACKNOWLEDGED),
        None,
        "no longer than that"
    );
    tokio::time::advance(LONGEST + Duration::from_millis(500)).await;
    batch.enqueue(&policy, vec![acknowledging("BReady", 2)], None);
    assert_eq!(
        batch.quiet_in("u", Instant::now()),
        None,
        "once B acknowledged it, due at once"
    );
    // The overall status is not waited for: the summarizer finds it as the request goes.
    batch.take_raw("u").unwrap();
    let overall = Map::new();
    batch.enqueue(&policy, vec![acknowledging("Ready", 1)], Some(overall));
    batch.enqueue(&policy, vec![acknowledging("AReady", 3)], None);
    batch.enqueue(&policy, vec![acknowledging("BReady", 3)], None);
    assert_eq!(batch.quiet_in("u", Instant::now() + WINDOW), None);
}
