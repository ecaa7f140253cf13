//! An operand's condition while it rolls out: ready/desired counts of its DaemonSets in the
//! cache, the first not-ready nodes with their reason, and OnDelete pods of an old revision (those
//! the operand says need replacing, when it says: see `Operand::POD_IN_SYNC`).

use k8s_openapi::api::{apps::v1::DaemonSet, core::v1::Pod};
use kube::{Api, ResourceExt as _, api::ListParams, runtime::reflector::ObjectRef};

use crate::{
    Context, Error,
    children::Children,
    operand::{Operand, PROBLEM_NODES},
    pod_summary::PodSummary,
    problems, readiness,
    status_write::Desired,
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
            rollout.outdated = out_of_sync(ctx, &live, in_sync).await?;
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

/// How many live pods of `ds` its operand says need replacing (`in_sync` is false), listed a page
/// at a time; pods being deleted are already on their way out.
async fn out_of_sync(
    ctx: &Context,
    ds: &DaemonSet,
    in_sync: fn(&DaemonSet, &Pod) -> bool,
) -> Result<i32, Error> {
    let selector = ds
        .spec
        .as_ref()
        .and_then(|s| s.selector.match_labels.as_ref())
        .map(|labels| {
            labels
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    let mut params = ListParams::default().labels(&selector).limit(PAGE);
    let mut count = 0;
    loop {
        let page = pods.list(&params).await.map_err(Error::kube(format!(
            "listing the pods of DaemonSet {}",
            ds.name_any()
        )))?;
        count += page
            .items
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none() && !in_sync(ds, p))
            .count();
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => break,
        }
    }
    Ok(i32::try_from(count).unwrap_or(i32::MAX))
}

/// Pods per list request when counting out-of-sync pods.
const PAGE: u32 = 500;

/// What an OnDelete DaemonSet with `count` pods of an older template says: they run until deleted.
fn old_revision(daemonset: &str, count: i32) -> String {
    format!(
        "{count} node(s) run an old revision of {daemonset}: its update strategy is OnDelete, so \
         a node gets the current one only when its pod is deleted (by the driver upgrade \
         controller, or `kubectl delete pod` on that node)"
    )
}
