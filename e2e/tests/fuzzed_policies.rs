//! Generated bad ClusterPolicies against the real API server, while the operator reconciles a
//! valid one: 300 mutations of our examples and NVIDIA's sample ClusterPolicies (leaves replaced
//! by values chosen to break parsers, keys removed, keys added) are sent as updates of the running
//! ClusterPolicy, server-side dry run, so admission (schema and CEL) judges each one. Every one is
//! either refused with the field path named, or accepted. A sample of the accepted ones is then
//! applied for real, one after the other: each is reconciled (the `Ready` condition's
//! observedGeneration catches up) and, unless it is ready, a condition says what is wrong; the
//! operator never exits; putting the valid spec back brings `ready` back. The unmutated NVIDIA
//! samples are accepted (valid NVIDIA input is never refused).
//!
//! Then generated device plugin configurations (mutations of valid ones) in the ConfigMap the
//! running policy names (`devicePlugin.config`), which the API server never judges: each is either
//! copied for the operands, or refused with a condition naming the ConfigMap and key while the
//! last good copy stays in place; the operator never exits, and a valid edit after each is copied
//! again.
#![cfg(feature = "e2e")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::large_futures
)]

use gpu_operator_e2e::scenario as support;

use std::path::Path;

use gpu_operator_api::{
    ClusterPolicy, ClusterPolicySpec,
    conditions::{self, operand::DEVICE_PLUGIN_READY},
};
use gpu_operator_harness::{
    mutate::{mutate, mutation, nvidia_sample_specs},
    unique_name, wait_until,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api,
    api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams},
};
use proptest::{
    strategy::{Strategy as _, ValueTree as _},
    test_runner::TestRunner,
};
use serde_json::{Value, json};
use support::{Cleanup, Env, IMAGES, TIMEOUT, condition, is_ready, setup, wait_policy};

/// How many mutated specs admission judges, and how many accepted ones are applied for real.
const GENERATED: usize = 500;
const APPLIED: usize = 12;
/// How many generated device plugin configurations the operator judges (each a reconcile, and a
/// valid edit after it: seconds apiece).
const GENERATED_CONFIGS: usize = 25;
/// The user's ConfigMap, its key, and the device plugin's checked copy of it.
const USER_CONFIG: &str = "fuzzed-plugin-config";
const KEY: &str = "any";
const COPY: &str = "nvidia-device-plugin-configs";

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// Our examples' and NVIDIA's sample ClusterPolicies' specs, NVIDIA's marked.
fn seeds() -> Vec<(bool, Value)> {
    let mut seeds: Vec<(bool, Value)> = gpu_operator_core::fixtures::examples(root())
        .unwrap()
        .into_iter()
        .map(|(_, spec)| (false, serde_json::to_value(spec).unwrap()))
        .collect();
    seeds.extend(
        nvidia_sample_specs(root())
            .unwrap()
            .into_iter()
            .map(|spec| (true, spec)),
    );
    seeds
}

/// Replaces the spec of policy `name` with `spec` (of the latest version; retried when the
/// operator's status write moved it meanwhile).
async fn update(
    api: &Api<DynamicObject>,
    name: &str,
    spec: &Value,
    params: &PostParams,
) -> Result<DynamicObject, kube::Error> {
    loop {
        let mut object = api.get(name).await?;
        object.data = serde_json::json!({ "spec": spec });
        match api.replace(name, params, &object).await {
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            result => return result,
        }
    }
}

#[tokio::test]
#[allow(clippy::too_many_lines, reason = "one scenario, step by step")]
async fn generated_bad_policies_are_refused_with_the_field_or_reported_never_a_crash() {
    let env = setup().await;
    let mut operator = env.start(&IMAGES);
    let name = unique_name("fuzzed");
    let _cleanup = Cleanup {
        namespace: env.namespace.clone(),
        policies: vec![name.clone()],
    };
    env.policies()
        .create(
            &PostParams::default(),
            &ClusterPolicy::new(&name, ClusterPolicySpec::default()),
        )
        .await
        .unwrap();
    wait_policy(&env, &name, "the valid policy to be ready", is_ready).await;
    let dynamic: Api<DynamicObject> = Api::all_with(
        env.client.clone(),
        &ApiResource::erase::<ClusterPolicy>(&()),
    );
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };

    // Valid NVIDIA input first: every sample is admitted as it is.
    let seeds = seeds();
    for (_, spec) in seeds.iter().filter(|(nvidia, _)| *nvidia) {
        update(&dynamic, &name, spec, &dry_run)
            .await
            .unwrap_or_else(|e| panic!("NVIDIA's sample refused: {e}"));
    }

    let mut runner = TestRunner::deterministic();
    let strategy = (0..seeds.len(), proptest::collection::vec(mutation(), 1..5));
    let (mut refused, mut accepted) = (0, Vec::new());
    for _ in 0..GENERATED {
        let (seed, mutations) = strategy.new_tree(&mut runner).unwrap().current();
        let spec = mutate(seeds[seed].1.clone(), &mutations);
        match update(&dynamic, &name, &spec, &dry_run).await {
            Ok(_) => accepted.push(spec),
            Err(kube::Error::Api(status)) => {
                assert!(
                    matches!(status.code, 400 | 422) && status.message.contains("spec."),
                    "refused without the field named: {status:?}"
                );
                refused += 1;
            }
            Err(other) => panic!("{other}"),
        }
    }
    eprintln!(
        "{GENERATED} generated: {refused} refused at admission with the field, {} accepted",
        accepted.len()
    );
    assert!(
        refused > 0 && accepted.len() > APPLIED,
        "both outcomes happen"
    );

    // Accepted ones, for real: each reconciled and judged, the operator alive.
    for spec in accepted.iter().take(APPLIED) {
        let updated = update(&dynamic, &name, spec, &PostParams::default())
            .await
            .unwrap();
        let generation = updated.metadata.generation;
        let reconciled = wait_until("the update to be reconciled", TIMEOUT, || async {
            let policy = env.policies().get(&name).await?;
            let done = condition(&policy, conditions::READY)
                .is_some_and(|c| c.observed_generation == generation);
            Ok(done.then_some(policy))
        })
        .await
        .unwrap_or_else(|e| panic!("{e}; operator log:\n{}", operator.log_tail()));
        if !is_ready(&reconciled) {
            let conditions = reconciled.status.and_then(|s| s.conditions).unwrap();
            assert!(
                conditions
                    .iter()
                    .any(|c| c.status == "False" && !c.message.is_empty()),
                "not ready and nothing says why: {conditions:#?}"
            );
        }
        assert!(
            operator.is_running(),
            "the operator exited: {}",
            operator.log_tail()
        );
    }

    // The valid spec back: ready again.
    let valid = serde_json::to_value(ClusterPolicySpec::default()).unwrap();
    update(&dynamic, &name, &valid, &PostParams::default())
        .await
        .unwrap();
    wait_policy(&env, &name, "ready again with the valid spec", is_ready).await;
    assert!(operator.is_running());

    generated_plugin_configs(&env, &name, &mut runner, &mut operator).await;
    operator.stop().unwrap();
}

/// A valid device plugin configuration: time-slicing with `replicas`.
fn time_slicing(replicas: u32) -> Value {
    json!({"version": "v1", "sharing": {"timeSlicing": {
        "resources": [{"name": "nvidia.com/gpu", "replicas": replicas}]
    }}})
}

/// Valid configurations to mutate.
fn config_seeds() -> Vec<Value> {
    vec![
        time_slicing(4),
        json!({"version": "v1", "flags": {"migStrategy": "none", "failOnInitError": true}}),
        json!({"version": "v1", "sharing": {"timeSlicing": {"renameByDefault": true,
            "resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}}),
    ]
}

async fn write_config(env: &Env, content: &str) {
    let config: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": USER_CONFIG},
        "data": {KEY: content},
    }))
    .unwrap();
    Api::<ConfigMap>::namespaced(env.client.clone(), &env.namespace)
        .patch(
            USER_CONFIG,
            &PatchParams::apply("fuzzed-policies-e2e").force(),
            &Patch::Apply(&config),
        )
        .await
        .unwrap();
}

/// The device plugin's checked copy of the user's key, once there.
async fn copied(env: &Env) -> Option<String> {
    Api::<ConfigMap>::namespaced(env.client.clone(), &env.namespace)
        .get_opt(COPY)
        .await
        .unwrap()
        .and_then(|c| c.data)
        .and_then(|mut data| data.remove(KEY))
}

/// Writes the valid `content` and waits until it is copied and no condition refuses a config.
async fn write_valid(env: &Env, name: &str, content: &str) {
    write_config(env, content).await;
    wait_until("the valid config to be copied", TIMEOUT, || async {
        let policy = env.policies().get(name).await?;
        let refusing =
            condition(&policy, DEVICE_PLUGIN_READY).is_some_and(|c| c.reason == "InvalidConfig");
        Ok((!refusing && copied(env).await.as_deref() == Some(content)).then_some(()))
    })
    .await
    .unwrap();
}

/// Generated configurations in the ConfigMap the running policy names: each copied or refused by
/// name, the last good copy kept, the operator alive.
async fn generated_plugin_configs(
    env: &Env,
    name: &str,
    runner: &mut TestRunner,
    operator: &mut gpu_operator_harness::operator::Operator,
) {
    let yaml = |value: &Value| serde_yaml::to_string(value).unwrap();
    let mut good = yaml(&time_slicing(2));
    write_config(env, &good).await;
    let reference =
        json!({"spec": {"devicePlugin": {"config": {"name": USER_CONFIG, "default": KEY}}}});
    env.policies()
        .patch(name, &PatchParams::default(), &Patch::Merge(&reference))
        .await
        .unwrap();
    write_valid(env, name, &good).await;

    let seeds = config_seeds();
    let strategy = (0..seeds.len(), proptest::collection::vec(mutation(), 1..4));
    let (mut refused, mut accepted) = (0, 0);
    for round in 0..GENERATED_CONFIGS {
        let (seed, mutations) = strategy.new_tree(runner).unwrap().current();
        let generated = yaml(&mutate(seeds[seed].clone(), &mutations));
        write_config(env, &generated).await;
        let verdict = wait_until("the generated config judged", TIMEOUT, || async {
            if copied(env).await.as_deref() == Some(generated.as_str()) {
                return Ok(Some(None));
            }
            let policy = env.policies().get(name).await?;
            Ok(condition(&policy, DEVICE_PLUGIN_READY)
                .filter(|c| c.status == "False" && c.reason == "InvalidConfig")
                .map(|c| Some(c.message.clone())))
        })
        .await
        .unwrap_or_else(|e| {
            panic!(
                "{e}; config:\n{generated}\noperator log:\n{}",
                operator.log_tail()
            )
        });
        match verdict {
            None => accepted += 1,
            Some(message) => {
                assert!(
                    message.contains(USER_CONFIG) && message.contains(KEY),
                    "refused without naming the ConfigMap and key: {message}"
                );
                assert_eq!(
                    copied(env).await.as_deref(),
                    Some(good.as_str()),
                    "the last good copy stays"
                );
                refused += 1;
            }
        }
        assert!(operator.is_running(), "{}", operator.log_tail());
        // A valid edit after each: copied again, nothing refused (so the next refusal is new).
        let replicas = u32::try_from(round).unwrap() + 3;
        good = yaml(&time_slicing(replicas));
        write_valid(env, name, &good).await;
    }
    eprintln!(
        "{GENERATED_CONFIGS} generated device plugin configs: {refused} refused naming the ConfigMap and key, {accepted} copied"
    );
    assert!(refused > 0, "a generated config is refused");
    wait_policy(env, name, "ready with the last valid config", is_ready).await;
    assert!(operator.is_running());
}
