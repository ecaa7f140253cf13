//! An operand's condition while it rolls out: ready/desired counts of its DaemonSets in the
//! cache, the first not-ready nodes with their reason, OnDelete pods of an old revision (those
//! the operand says need replacing, when it says: see `Operand::POD_IN_SYNC`), and its
//! Deployments' available replicas (the DRA driver's ComputeDomain controller).

use std::time::Instant;

use k8s_openapi::api::{
    apps::v1::{DaemonSet, Deployment},
    core::v1::Pod,
};
use kube::{Api, ResourceExt as _, api::ListParams, runtime::reflector::ObjectRef};

use crate::{
    Context, Error,
    cache::{pod_install::PodInstall, pod_summary::PodSummary},
    contract::{Children, Operand},
    report::{
        conditions::Desired,
        problems::{self, PROBLEM_NODES},
        readiness::{self, TEMPLATE_GENERATION_LABEL},
    },
};

/// The operand's condition from its DaemonSets in the cache.
pub(crate) async fn rollout_condition<O: Operand>(
    ctx: &Context,
    children: &Children,
    unserved: Option<String>,
) -> Result<Desired, Error> {
    let (mut desired, mut ready, mut problems) = (0, 0, Vec::new());
    let mut outdated = Vec::new();
    // Every DaemonSet rolled out (updated pods ready for its generation), not only as many ready
    // pods as desired: during a rolling update old pods count as ready, and whether a replaced
    // pod happens to be pending when its problems are listed would flip the condition.
    let mut rolled_out = true;
    let pods: Api<PodSummary> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    // A snapshot of the node cache (thousands of entries) only once a DaemonSet is not ready.
    let mut nodes = None;
    for ds in &children.daemonsets {
        let Some(live) = ctx
            .stores
            .daemonsets
            .get(&ObjectRef::new(&ds.name_any()).within(&ctx.namespace))
        else {
            return Ok(Desired::not_ok(
                O::CONDITION,
                "RollingOut",
                format!("DaemonSet {} is being created", ds.name_any()),
            ));
        };
        let mut rollout = readiness::rollout(&live);
        if rollout.outdated > 0
            && let Some(in_sync) = O::POD_IN_SYNC
        {
            rollout.outdated = if runs_older_pods(&live) {
                old_revision_count(ctx, &live, in_sync, rollout.outdated).await?
            } else {
                0
            };
            rollout.is_ready = rollout.is_ready_but_outdated && rollout.outdated == 0;
        }
        desired += rollout.desired;
        ready += rollout.ready;
        if rollout.outdated > 0 {
            outdated.push(old_revision(&live.name_any(), rollout.outdated));
        }
        rolled_out &= rollout.is_ready;
        if !rollout.is_ready && problems.len() < PROBLEM_NODES {
            let limit = PROBLEM_NODES - problems.len();
            let nodes = nodes.get_or_insert_with(|| ctx.stores.nodes.state());
            let found =
                problems::problem_nodes(&pods, &live, nodes, limit, &ctx.problem_scans).await?;
            problems.extend(found);
        }
    }
    let counts = format!("ready on {ready}/{desired} GPU nodes");
    let progress = |d: Desired| {
        d.with_progress(
            usize::try_from(ready).unwrap_or_default(),
            usize::try_from(desired).unwrap_or_default(),
        )
    };
    if let Some(unserved) = unserved {
        return Ok(progress(Desired::not_ok(
            O::CONDITION,
            "NodesNotServed",
            format!("{counts}; {unserved}"),
        )));
    }
    for deployment in &children.deployments {
        let name = deployment.name_any();
        let live = ctx
            .stores
            .deployments
            .get(&ObjectRef::new(&name).within(&ctx.namespace));
        if let Some(waiting) = deployment_waiting(&name, live.as_deref()) {
            outdated.push(waiting);
            rolled_out = false;
        }
    }
    if problems.is_empty() && outdated.is_empty() && ready >= desired && rolled_out {
        return Ok(progress(Desired::ok(O::CONDITION, "Ready", counts)));
    }
    let named: Vec<String> = problems
        .iter()
        .map(|p| format!("{}: {}", p.node, p.reason))
        .collect();
    let mut details = outdated;
    if !named.is_empty() {
        details.push(format!("not ready on {}", named.join("; ")));
    }
    // OnDelete pods of an old template are the finding when they are all there is.
    let reason = if problems.is_empty() && !details.is_empty() {
        "OldRevision"
    } else {
        "NotReady"
    };
    if details.is_empty() {
        details.push("rolling out".to_owned());
    }
    Ok(progress(Desired::not_ok(
        O::CONDITION,
        reason,
        format!("{counts}; {}", details.join("; ")),
    )))
}

/// What Deployment `name` (`live` in the cache) still waits for, if anything: to be created, to
/// be seen at its generation, or replicas of its template to be available.
fn deployment_waiting(name: &str, live: Option<&Deployment>) -> Option<String> {
    let Some(live) = live else {
        return Some(format!("Deployment {name} is being created"));
    };
    let wanted = live.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let status = live.status.clone().unwrap_or_default();
    let available = status.available_replicas.unwrap_or(0);
    let updated = status.updated_replicas.unwrap_or(0);
    let seen = status.observed_generation >= live.metadata.generation;
    (!seen || available < wanted || updated < wanted)
        .then(|| format!("Deployment {name}: {available}/{wanted} replicas available"))
}

/// Whether `ds` may run pods of an older template: the DaemonSet controller counts the nodes
/// that run a pod of it (`currentNumberScheduled`) and those whose pod is of the current template
/// (`updatedNumberScheduled`). A node still waiting for its first pod is pending, not outdated, so
/// a first rollout (every pod made from the current template) lists no pods.
fn runs_older_pods(ds: &DaemonSet) -> bool {
    ds.status
        .as_ref()
        .is_some_and(|s| s.current_number_scheduled > s.updated_number_scheduled.unwrap_or(0))
}

/// The label selector of the pods of `ds` made from an older template than its current one (a
/// pod of the current template is in sync by definition; see `Operand::POD_IN_SYNC`).
fn older_pods_selector(ds: &DaemonSet) -> String {
    let mut terms: Vec<String> = ds
        .spec
        .as_ref()
        .and_then(|s| s.selector.match_labels.as_ref())
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    if let Some(generation) = ds.metadata.generation {
        terms.push(format!("{TEMPLATE_GENERATION_LABEL}!={generation}"));
    }
    terms.join(",")
}

/// How many live pods of `ds` need replacing, at most `bound` (the DaemonSet's own count of nodes
/// with a pod of an older template). The pods are listed at most once per
/// [`problems::FULL_SCAN_EVERY`] for a template; in between the last count stands, so that a
/// driver upgrade, which changes the DaemonSet's counts with every node, does not list every old
/// driver pod again for each (at 1,000 nodes that was a list of 857 pods a second, most of the
/// upgrade's CPU). The count shows only in the condition's message; whether any old pod is left
/// comes from the DaemonSet's counts, which are always current.
async fn old_revision_count(
    ctx: &Context,
    ds: &DaemonSet,
    in_sync: fn(&DaemonSet, &Pod) -> bool,
    bound: i32,
) -> Result<i32, Error> {
    let clock = &ctx.problem_scans;
    let key = format!("{}/old-revision", ds.name_any());
    let generation = ds.metadata.generation;
    let due = clock.due(&key, Instant::now());
    if let Some(last) = clock.last_count(&key, generation)
        && !due
    {
        return Ok(last.min(bound));
    }
    let count = out_of_sync(ctx, ds, in_sync).await?;
    clock.record_count(&key, generation, count);
    Ok(count)
}

/// How many live pods of `ds` its operand says need replacing (`in_sync` is false): those of an
/// older template, listed a page at a time; pods being deleted are already on their way out.
async fn out_of_sync(
    ctx: &Context,
    ds: &DaemonSet,
    in_sync: fn(&DaemonSet, &Pod) -> bool,
) -> Result<i32, Error> {
    let pods: Api<PodInstall> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    let mut params = ListParams::default()
        .labels(&older_pods_selector(ds))
        .limit(PAGE);
    let mut count = 0;
    loop {
        let page = pods.list(&params).await.map_err(Error::kube(format!(
            "listing the pods of DaemonSet {}",
            ds.name_any()
        )))?;
        count += page
            .items
            .into_iter()
            .map(Pod::from)
            .filter(|p| {
                p.metadata.deletion_timestamp.is_none() && owned_by(p, ds) && !in_sync(ds, p)
            })
            .count();
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => break,
        }
    }
    Ok(i32::try_from(count).unwrap_or(i32::MAX))
}

/// Whether `ds` is the controller of `pod`. The driver's DaemonSets (one per OS) share their
/// selector, so its pods list those of the others too.
fn owned_by(pod: &Pod, ds: &DaemonSet) -> bool {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && Some(&o.uid) == ds.metadata.uid.as_ref())
}

/// Pods per list request when counting out-of-sync pods: each parsed down to what it installs
/// ([`PodInstall`]), so a page stays about a MiB (the allocator keeps a process's peak heap as
/// resident memory).
const PAGE: u32 = 100;

/// What an OnDelete DaemonSet with `count` pods of an older template says: they run until deleted.
fn old_revision(daemonset: &str, count: i32) -> String {
    format!(
        "{count} node(s) run an old revision of {daemonset}: its update strategy is OnDelete, so \
         a node gets the current one only when its pod is deleted (by the driver upgrade \
         controller, or `kubectl delete pod` on that node)"
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::{
        api::apps::v1::{DaemonSetSpec, DaemonSetStatus},
        apimachinery::pkg::apis::meta::v1::LabelSelector,
    };

    use super::*;

    #[test]
    fn a_deployment_waits_until_its_replicas_of_its_generation_are_available() {
        assert_eq!(
            deployment_waiting("c", None).as_deref(),
            Some("Deployment c is being created")
        );
        let mut live: Deployment = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "c", "generation": 2},
            "spec": {"replicas": 1, "selector": {}, "template": {}},
            "status": {"observedGeneration": 2, "availableReplicas": 0, "updatedReplicas": 1},
        }))
        .unwrap();
        assert_eq!(
            deployment_waiting("c", Some(&live)).as_deref(),
            Some("Deployment c: 0/1 replicas available")
        );
        live.status.as_mut().unwrap().available_replicas = Some(1);
        assert_eq!(deployment_waiting("c", Some(&live)), None);
        live.metadata.generation = Some(3);
        assert!(
            deployment_waiting("c", Some(&live)).is_some(),
            "not seen yet"
        );
    }

    fn driver(generation: i64, current: i32, updated: Option<i32>) -> DaemonSet {
        let mut ds = DaemonSet {
            spec: Some(DaemonSetSpec {
                selector: LabelSelector {
                    match_labels: Some(BTreeMap::from([(
                        "app".to_owned(),
                        "nvidia-driver-daemonset".to_owned(),
                    )])),
                    ..LabelSelector::default()
                },
                ..DaemonSetSpec::default()
            }),
            status: Some(DaemonSetStatus {
                desired_number_scheduled: 857,
                current_number_scheduled: current,
                updated_number_scheduled: updated,
                ..DaemonSetStatus::default()
            }),
            ..DaemonSet::default()
        };
        ds.metadata.generation = Some(generation);
        ds
    }

    #[test]
    fn only_the_daemonsets_own_pods_count_not_those_of_a_sibling_with_its_selector() {
        let mut ubuntu = driver(2, 1, Some(0));
        ubuntu.metadata.uid = Some("ubuntu-uid".to_owned());
        let pod = |owner: &str, controller: bool| {
            let mut pod = Pod::default();
            pod.metadata.owner_references = Some(vec![
                k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                    uid: owner.to_owned(),
                    controller: Some(controller),
                    ..Default::default()
                },
            ]);
            pod
        };
        assert!(owned_by(&pod("ubuntu-uid", true), &ubuntu));
        assert!(
            !owned_by(&pod("rhel-uid", true), &ubuntu),
            "a sibling's pod"
        );
        assert!(
            !owned_by(&pod("ubuntu-uid", false), &ubuntu),
            "not its controller"
        );
        assert!(!owned_by(&Pod::default(), &ubuntu), "no owner");
    }

    #[test]
    fn a_first_rollout_lists_no_pods_an_upgrade_does() {
        // 300 of 857 nodes run a pod, all of the current template: the rest are pending.
        assert!(!runs_older_pods(&driver(1, 300, Some(300))));
        assert!(!runs_older_pods(&driver(1, 0, None)));
        assert!(!runs_older_pods(&DaemonSet::default()), "no status yet");
        // After a template change: 857 nodes run a pod, 200 of them of the new template.
        assert!(runs_older_pods(&driver(2, 857, Some(200))));
        assert!(runs_older_pods(&driver(2, 857, None)));
    }

    #[test]
    fn only_pods_of_older_templates_are_listed() {
        assert_eq!(
            older_pods_selector(&driver(4, 857, Some(10))),
            "app=nvidia-driver-daemonset,pod-template-generation!=4"
        );
        let mut unsaved = driver(4, 857, Some(10));
        unsaved.metadata.generation = None;
        assert_eq!(older_pods_selector(&unsaved), "app=nvidia-driver-daemonset");
    }
}
