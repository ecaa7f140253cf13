//! What the chaos runs compare: every object that carries the operator's
//! `app.kubernetes.io/managed-by` label (found through discovery, so a kind nobody thought of is
//! not missed), the operand pods' UIDs by DaemonSet, and each DaemonSet's generation.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::{apps::v1::DaemonSet, core::v1::Pod};
use kube::{
    Api, ResourceExt as _,
    api::{DynamicObject, ListParams},
    discovery::{Discovery, verbs},
};

/// The label selector of everything the operator creates.
pub const OURS: &str = "app.kubernetes.io/managed-by=gpu-operator";

/// Kinds that carry our labels without being rendered from the ClusterPolicy: pods (checked by
/// UID instead), the DaemonSets' revision history, and what other controllers derive.
const DERIVED: [&str; 5] = [
    "pods",
    "controllerrevisions",
    "events",
    "endpoints",
    "endpointslices",
];

/// Every labelled object as `group/kind namespace/name`.
pub async fn labelled_objects(client: &kube::Client) -> anyhow::Result<BTreeSet<String>> {
    let discovery = Discovery::new(client.clone()).run().await?;
    let mut objects = BTreeSet::new();
    let params = ListParams::default().labels(OURS);
    for group in discovery.groups() {
        // The preferred version only: the same object served under two versions is one object.
        for (resource, capabilities) in group.recommended_resources() {
            if !capabilities.supports_operation(verbs::LIST)
                || DERIVED.contains(&resource.plural.as_str())
            {
                continue;
            }
            // Every namespace for namespaced kinds: an orphan may be anywhere.
            let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
            for object in api.list(&params).await?.items {
                objects.insert(format!(
                    "{}/{} {}/{}",
                    resource.group,
                    resource.kind,
                    object.namespace().unwrap_or_default(),
                    object.name_any()
                ));
            }
        }
    }
    Ok(objects)
}

/// The operand pods in `namespace`: UID → the DaemonSet that owns the pod and the template
/// revision it runs (its `controller-revision-hash`).
pub async fn pods(
    client: &kube::Client,
    namespace: &str,
) -> anyhow::Result<BTreeMap<String, (String, String)>> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let params = ListParams::default().labels(OURS);
    Ok(api
        .list(&params)
        .await?
        .items
        .into_iter()
        .filter_map(|pod| {
            let owner = pod
                .owner_references()
                .iter()
                .find(|o| o.kind == "DaemonSet")?
                .name
                .clone();
            let revision = pod
                .labels()
                .get("controller-revision-hash")
                .cloned()
                .unwrap_or_default();
            Some((pod.uid()?, (owner, revision)))
        })
        .collect())
}

/// Each of our DaemonSets in `namespace` with its `metadata.generation`.
pub async fn generations(
    client: &kube::Client,
    namespace: &str,
) -> anyhow::Result<BTreeMap<String, i64>> {
    let api: Api<DaemonSet> = Api::namespaced(client.clone(), namespace);
    let params = ListParams::default().labels(OURS);
    Ok(api
        .list(&params)
        .await?
        .items
        .into_iter()
        .map(|ds| (ds.name_any(), ds.metadata.generation.unwrap_or_default()))
        .collect())
}

/// Whether every DaemonSet of ours has caught up with its spec and has every scheduled pod
/// updated and ready.
pub async fn daemonsets_rolled_out(client: &kube::Client, namespace: &str) -> anyhow::Result<bool> {
    let api: Api<DaemonSet> = Api::namespaced(client.clone(), namespace);
    let params = ListParams::default().labels(OURS);
    let list = api.list(&params).await?.items;
    Ok(!list.is_empty()
        && list.iter().all(|ds| {
            let status = ds.status.clone().unwrap_or_default();
            status.observed_generation == ds.metadata.generation
                && status.updated_number_scheduled.unwrap_or_default()
                    == status.desired_number_scheduled
                && status.number_ready == status.desired_number_scheduled
        }))
}

/// Pods that were running at `before` and are gone at `after` although nothing justified it:
/// their DaemonSet's generation did not move in between, and they already ran the template
/// revision the DaemonSet's pods run at `after` (a pod of an older revision being replaced is the
/// DaemonSet controller finishing a change, not a restart's doing).
pub fn pods_replaced_without_cause(
    before: &BTreeMap<String, (String, String)>,
    after: &BTreeMap<String, (String, String)>,
    generations_before: &BTreeMap<String, i64>,
    generations_after: &BTreeMap<String, i64>,
) -> usize {
    let current: BTreeSet<&(String, String)> = after.values().collect();
    before
        .iter()
        .filter(|(uid, pod)| {
            let (owner, _) = pod;
            !after.contains_key(*uid)
                && current.contains(pod)
                && generations_before.get(owner) == generations_after.get(owner)
        })
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map<V: Clone>(pairs: &[(&str, V)]) -> BTreeMap<String, V> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect()
    }

    #[test]
    fn a_replaced_pod_counts_only_when_nothing_about_its_daemonset_changed() {
        let pod = |owner: &str, revision: &str| (owner.to_owned(), revision.to_owned());
        let before = map(&[
            ("u1", pod("plugin", "r2")),
            ("u2", pod("plugin", "r2")),
            ("u3", pod("dcgm", "r1")),
            ("u6", pod("gfd", "r1")),
        ]);
        let after = map(&[
            ("u2", pod("plugin", "r2")),
            ("u4", pod("dcgm", "r2")),
            ("u5", pod("plugin", "r2")),
            ("u7", pod("gfd", "r2")),
        ]);
        // The device plugin kept its template and u1 already ran it: u1 counts. DCGM rolled a
        // new template after the kill: u3 does not. GFD's template had changed before the kill
        // and u6 ran the old one: its replacement finishes that change, so it does not count.
        let gens_before = map(&[("plugin", 3), ("dcgm", 1), ("gfd", 2)]);
        let gens_after = map(&[("plugin", 3), ("dcgm", 2), ("gfd", 2)]);
        assert_eq!(
            pods_replaced_without_cause(&before, &after, &gens_before, &gens_after),
            1
        );
        assert_eq!(
            pods_replaced_without_cause(&before, &before, &gens_before, &gens_before),
            0
        );
    }
}
