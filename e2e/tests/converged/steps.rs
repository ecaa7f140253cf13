//! The steps of the converged-writes scenario: converge on a policy, and the node status
//! exporter's DaemonSet (the quiet window and the positive control are in the library's `quiet`).

use std::time::Duration;

use gpu_operator_api::{ClusterPolicy, ClusterPolicySpec, conditions::DRIVER_UPGRADE};
use gpu_operator_harness::{operator::Operator, wait_until};
use kube::api::{DeleteParams, ListParams, PostParams};

use super::support::{Env, TIMEOUT, condition, is_ready, pods_of, wait_policy, wait_settled};

/// Creates the ClusterPolicy `name` with `spec` (or replaces its spec) and waits until it is ready
/// for that spec, every DaemonSet in the namespace has rolled out (OnDelete ones: is ready), and
/// nothing has changed for 5 s.
pub async fn converge(
    env: &Env,
    name: &str,
    spec: &ClusterPolicySpec,
    operator: &Operator,
    stem: &str,
) {
    let generation = match env.policies().get_opt(name).await.unwrap() {
        None => {
            let created = env
                .policies()
                .create(
                    &PostParams::default(),
                    &ClusterPolicy::new(name, spec.clone()),
                )
                .await
                .unwrap();
            created.metadata.generation
        }
        Some(mut live) => {
            live.spec = spec.clone();
            let replaced = env
                .policies()
                .replace(name, &PostParams::default(), &live)
                .await
                .unwrap();
            replaced.metadata.generation
        }
    };
    // With `driver.upgradePolicy.autoUpgrade` on (the chart's default example), the driver
    // upgrade reconciler may be moving nodes whose pods the test replaced below: converged only
    // once it reports no node upgrading (`DriverUpgrade` True), so its node writes are over.
    let converged = |p: &ClusterPolicy| {
        is_ready(p)
            && condition(p, DRIVER_UPGRADE).is_none_or(|c| c.status == "True")
            && p.metadata.generation == generation
            && p.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().all(|c| c.observed_generation == generation))
    };
    // The driver's DaemonSet updates OnDelete, so a spec change that alters its template leaves
    // pods of the old revision, which `DriverReady` reports (reason `OldRevision`) until they are
    // replaced. Here the test does what a person would do (most examples leave autoUpgrade off;
    // where it is on, this only gets there sooner): it deletes them, then waits for the policy to
    // be ready. The driver upgrade itself is `driver_upgrade.rs`'s scenario.
    wait_until(
        &format!("{stem}: old OnDelete pods replaced and the ClusterPolicy ready"),
        TIMEOUT,
        || async {
            delete_pods_of_old_on_delete_revisions(env).await?;
            let policy = env.policies().get(name).await?;
            Ok(converged(&policy).then_some(()))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", operator.log_tail()));
    wait_policy(
        env,
        name,
        &format!("{stem}: the ClusterPolicy to be ready"),
        converged,
    )
    .await;
    wait_until(
        &format!("{stem}: every DaemonSet to roll out"),
        TIMEOUT,
        || async {
            let all = env.daemonsets().list(&ListParams::default()).await?.items;
            let done = all.iter().all(|ds| {
                let status = ds.status.clone().unwrap_or_default();
                // The driver updates OnDelete (its upgrade controller replaces the pods): its old
                // pods stay until then, so only readiness counts there.
                let on_delete = ds
                    .spec
                    .as_ref()
                    .and_then(|s| s.update_strategy.as_ref())
                    .and_then(|u| u.type_.as_deref())
                    == Some("OnDelete");
                status.observed_generation == ds.metadata.generation
                    && status.number_ready == status.desired_number_scheduled
                    && (on_delete
                        || status.updated_number_scheduled.unwrap_or_default()
                            == status.desired_number_scheduled)
            });
            Ok((!all.is_empty() && done).then_some(()))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", operator.log_tail()));
    // Settled: nothing written for longer than the status write gate holds a message-only
    // change, so one held from the rollout cannot land in the quiet window that follows.
    wait_settled(
        env,
        name,
        gpu_operator_core::pipeline::write_gate::QUIET + Duration::from_secs(2),
    )
    .await;
    assert!(
        condition(
            &env.policies().get(name).await.unwrap(),
            gpu_operator_api::conditions::READY
        )
        .is_some_and(|c| c.status == "True"),
        "{stem}: ready"
    );
}

/// Deletes the pods of every OnDelete DaemonSet (the driver's) whose status counts pods of an
/// older template; the DaemonSet controller recreates them from the current one.
async fn delete_pods_of_old_on_delete_revisions(env: &Env) -> anyhow::Result<()> {
    for ds in env.daemonsets().list(&ListParams::default()).await?.items {
        let Some(spec) = ds.spec.as_ref() else {
            continue;
        };
        let on_delete = spec
            .update_strategy
            .as_ref()
            .and_then(|u| u.type_.as_deref())
            == Some("OnDelete");
        let status = ds.status.clone().unwrap_or_default();
        let outdated = status.observed_generation == ds.metadata.generation
            && status.updated_number_scheduled.unwrap_or_default()
                < status.desired_number_scheduled;
        if !(on_delete && outdated) {
            continue;
        }
        let selector: Vec<String> = spec
            .selector
            .match_labels
            .iter()
            .flatten()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        env.pods()
            .delete_collection(
                &DeleteParams::default(),
                &ListParams::default().labels(&selector.join(",")),
            )
            .await?;
    }
    Ok(())
}

/// NVIDIA's `nvidia-node-status-exporter` DaemonSet exists and has a pod on every GPU node.
pub async fn node_status_exporter_runs_on_every_gpu_node(env: &Env, gpus: &[String]) {
    let pods = pods_of(env, "nvidia-node-status-exporter").await;
    let missing: Vec<&String> = gpus.iter().filter(|g| !pods.contains_key(*g)).collect();
    assert!(
        missing.is_empty(),
        "nvidia-node-status-exporter has no pod on {missing:?}: {pods:?}"
    );
    let ds = env
        .daemonsets()
        .get("nvidia-node-status-exporter")
        .await
        .unwrap();
    let status = ds.status.unwrap_or_default();
    assert_eq!(status.number_ready, status.desired_number_scheduled);
}
