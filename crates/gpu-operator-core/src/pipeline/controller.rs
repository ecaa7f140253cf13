//! Wiring reconcilers into kube-runtime Controllers over the shared caches: each operand watches
//! its owners (ClusterPolicies for the ClusterPolicy's operands), owns every kind it renders, and
//! is woken by node label changes and GPU-node runtime changes (not by the status heartbeats of
//! thousands of nodes), by a change of the data of a user's ConfigMap in the operator namespace
//! (one the owner may name), when the ServiceMonitor CRD comes or goes, and (for an owner kind
//! that is no singleton, NVIDIADriver) when a ClusterPolicy's spec changes, which such an
//! operand takes its shared settings and its opt-in from. A reconcile starts on
//! the first event; see [`crate::pipeline::coalesce`] for how bursts are merged. Every trigger
//! names the owner by the same key, so one operand never runs two reconciles of one owner at once.
//! The node streams come filtered by the shared caches (see [`crate::cache::change_stream`]); the
//! stream filters ([`changes`], [`owner_changes`]) and [`served`] serve the other reconcilers'
//! controllers too.

use std::{
    collections::HashMap,
    future::Future,
    hash::{DefaultHasher, Hash as _, Hasher as _},
    sync::Arc,
};

use futures::{Stream, StreamExt as _};
use kube::{
    ResourceExt as _,
    runtime::{
        Controller,
        reflector::{ObjectRef, Store},
    },
};

use crate::{
    Context,
    build::meta,
    cache::stores::Subscriptions,
    contract::{Operand, Owner},
    pipeline::{
        active,
        coalesce::{self, BURST_PERIOD, throttle, throttle_by},
        operand,
    },
};

/// Runs the reconciler of operand `O` until `shutdown` resolves.
pub fn run_operand<O: Operand>(
    ctx: Arc<Context>,
    subs: Subscriptions,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> impl Future<Output = ()> {
    let owners = <O::Owner as Owner>::cache(&ctx.stores).clone();
    let runtime_owners = owners.clone();
    let crd_owners = owners.clone();
    let rule_crd_owners = owners.clone();
    let config_owners = owners.clone();
    let policy_owners = owners.clone();
    let peer_owners = owners.clone();
    // Only an owner kind that is no singleton reads the ClusterPolicy besides its own spec.
    let policy_specs = changes(
        subs.policies
            .clone()
            .filter(|_| std::future::ready(!<O::Owner as Owner>::SINGLETON)),
        |policy, hasher| (&policy.metadata.uid, policy.metadata.generation).hash(hasher),
    );
    let user_configs = changes(
        subs.config_maps
            .clone()
            .filter(|cm| std::future::ready(!meta::is_managed(cm.as_ref()))),
        |cm, hasher| cm.data.hash(hasher),
    );
    // Of an owner kind that is no singleton, a peer's spec (or its going) moves which nodes each
    // one serves (two NVIDIADrivers selecting one node): every one is woken.
    let peer_specs = changes(
        <O::Owner as Owner>::changes(&subs)
            .filter(|_| std::future::ready(!<O::Owner as Owner>::SINGLETON)),
        |peer, hasher| {
            let meta = kube::Resource::meta(peer);
            (
                &meta.uid,
                meta.generation,
                meta.deletion_timestamp.is_some(),
            )
                .hash(hasher);
        },
    );
    let owner_events = owner_changes(<O::Owner as Owner>::changes(&subs), O::CONDITION);
    // Pod rollouts move DaemonSet statuses and node labels in bursts: throttled (the patch path,
    // owner → render → apply, is not).
    // By owner: the DaemonSets of two owners (NVIDIADrivers) change in one period.
    let daemonsets = throttle_by(
        of_component(subs.daemonsets, O::NAME),
        BURST_PERIOD,
        owner_key,
    );
    let runtimes = throttle(subs.runtime_changes, BURST_PERIOD);
    let nodes = throttle(subs.node_labels, BURST_PERIOD);
    Controller::for_shared_stream(owner_events, owners.clone())
        .with_config(coalesce::config())
        .watches_shared_stream(of_component(subs.service_accounts, O::NAME), owner_of)
        .watches_shared_stream(of_component(subs.roles, O::NAME), owner_of)
        .watches_shared_stream(of_component(subs.role_bindings, O::NAME), owner_of)
        .watches_shared_stream(of_component(subs.cluster_roles, O::NAME), owner_of)
        .watches_shared_stream(of_component(subs.cluster_role_bindings, O::NAME), owner_of)
        .watches_shared_stream(of_component(subs.config_maps, O::NAME), owner_of)
        .watches_shared_stream(of_component(subs.services, O::NAME), owner_of)
        .watches_shared_stream(of_component(subs.runtime_classes, O::NAME), owner_of)
        .watches_shared_stream(of_component(subs.admission_policies, O::NAME), owner_of)
        .watches_shared_stream(
            of_component(subs.admission_policy_bindings, O::NAME),
            owner_of,
        )
        .watches_shared_stream(of_component(subs.device_classes, O::NAME), owner_of)
        .watches_shared_stream(
            of_component(subs.resource_claim_templates, O::NAME),
            owner_of,
        )
        .watches_shared_stream(of_component(subs.deployments, O::NAME), owner_of)
        .watches_shared_stream(daemonsets, owner_of)
        .watches_shared_stream(nodes, move |_| served(&owners))
        .watches_shared_stream(runtimes, move |_| served(&runtime_owners))
        .watches_shared_stream(user_configs, move |_| served(&config_owners))
        .watches_shared_stream(subs.service_monitor_crds, move |_| served(&crd_owners))
        .watches_shared_stream(subs.prometheus_rule_crds, move |_| served(&rule_crd_owners))
        .watches_shared_stream(policy_specs, move |_| served(&policy_owners))
        .watches_shared_stream(peer_specs, move |_| served(&peer_owners))
        .graceful_shutdown_on(shutdown)
        .run(operand::reconcile::<O>, operand::error_policy::<O>, ctx)
        .for_each(|result| log(O::NAME, result))
}

/// The owner of kind `K` of `object`, keyed as the owner's own events are: by name, with no
/// namespace. (kube's `owns` keys the owner with the child's namespace, so a DaemonSet's event
/// and the ClusterPolicy's own were two keys, and two reconciles of one operand ran at once: each
/// applied and wrote the same change.)
#[expect(
    clippy::needless_pass_by_value,
    reason = "the mapper signature of watches_shared_stream"
)]
fn owner_of<K: Owner, C: kube::Resource>(object: Arc<C>) -> Option<ObjectRef<K>> {
    let kind = K::kind(&());
    let api_version = K::api_version(&());
    object
        .owner_references()
        .iter()
        .find(|owner| owner.kind == kind && owner.api_version == api_version)
        .map(|owner| ObjectRef::new(&owner.name))
}

/// The owner of `object` by uid, for [`throttle_by`].
fn owner_key<C: kube::Resource>(object: &Arc<C>) -> Option<String> {
    object
        .owner_references()
        .first()
        .map(|owner| owner.uid.clone())
}

/// The owners a cluster-wide change (a node's, a CRD's) concerns: the active one of a singleton
/// kind, every one not being deleted of another (see [`active`]).
pub fn served<K: Owner>(owners: &Store<K>) -> Vec<ObjectRef<K>> {
    let all = owners.state();
    if K::SINGLETON {
        active::active(&all)
            .map(|owner| ObjectRef::from_obj(owner.as_ref()))
            .into_iter()
            .collect()
    } else {
        all.iter()
            .filter(|owner| active::is_active(owner.as_ref(), &all))
            .map(|owner| ObjectRef::from_obj(owner.as_ref()))
            .collect()
    }
}

/// Passes an owner on when what a reconciler writing `condition` acts on changed: its identity,
/// spec (generation), metadata, deletion, overall state, or that one condition. The status writes
/// of the other reconcilers (hundreds while thousands of nodes roll out) do not wake it.
pub fn owner_changes<S, K>(owners: S, condition: &'static str) -> impl Stream<Item = Arc<K>> + Send
where
    S: Stream<Item = Arc<K>> + Send,
    K: Owner,
{
    changes(owners, move |owner, hasher| {
        let meta = owner.meta();
        (&meta.uid, meta.generation, &meta.labels, &meta.annotations).hash(hasher);
        meta.deletion_timestamp.is_some().hash(hasher);
        owner.state().hash(hasher);
        let own = owner
            .conditions()
            .and_then(|c| c.iter().find(|c| c.type_ == condition));
        own.map(|c| (&c.status, &c.reason, &c.message, c.observed_generation))
            .hash(hasher);
    })
}

/// Passes only the children of reconciler `component` (by their `app.kubernetes.io/component`
/// label; unlabelled ones too): every operand's children have the same owner, so without this each DaemonSet status update would wake every operand.
fn of_component<S, K>(objects: S, component: &'static str) -> impl Stream<Item = Arc<K>> + Send
where
    S: Stream<Item = Arc<K>> + Send,
    K: kube::Resource + Send + Sync,
{
    objects.filter(move |object| {
        let label = object.labels().get(meta::COMPONENT_LABEL);
        std::future::ready(label.is_none_or(|c| c == component))
    })
}

/// Passes an object on only when what `fingerprint` hashes of it changed (or it is new), and
/// always when it is deleted (it comes with a deletion timestamp, see
/// [`crate::cache::change_stream`]). It remembers one pair of hashes per object (its name's and the
/// fingerprint), not the names.
pub fn changes<S, K>(
    objects: S,
    fingerprint: impl Fn(&K, &mut DefaultHasher) + Send + 'static,
) -> impl Stream<Item = Arc<K>> + Send
where
    S: Stream<Item = Arc<K>> + Send,
    K: kube::Resource + Send + Sync,
{
    let mut seen: HashMap<u64, u64> = HashMap::new();
    objects.filter(move |object| {
        let mut hasher = DefaultHasher::new();
        fingerprint(object, &mut hasher);
        let hash = hasher.finish();
        let mut hasher = DefaultHasher::new();
        object.meta().name.hash(&mut hasher);
        let name = hasher.finish();
        let changed = if object.meta().deletion_timestamp.is_some() {
            seen.remove(&name);
            true
        } else {
            seen.insert(name, hash) != Some(hash)
        };
        std::future::ready(changed)
    })
}

/// Logs the outcome of one reconcile of `reconciler`.
pub fn log<T: std::fmt::Debug, E: std::fmt::Display>(
    reconciler: &str,
    result: Result<T, E>,
) -> std::future::Ready<()> {
    match result {
        Ok(object) => tracing::debug!(reconciler, ?object, "reconciled"),
        Err(error) => tracing::warn!(reconciler, %error, "reconcile failed"),
    }
    std::future::ready(())
}

#[cfg(test)]
mod tests {
    use gpu_operator_api::ClusterPolicy;
    use k8s_openapi::{
        api::{apps::v1::DaemonSet, core::v1::ConfigMap},
        apimachinery::pkg::apis::meta::v1::OwnerReference,
    };

    use super::*;

    #[test]
    fn a_childs_event_names_its_cluster_policy_by_the_policys_own_key() {
        let mut policy = ClusterPolicy::new(
            "cluster-policy",
            gpu_operator_api::ClusterPolicySpec::default(),
        );
        policy.metadata.uid = Some("u".to_owned());
        let mut ds = DaemonSet::default();
        ds.metadata.name = Some("nvidia-device-plugin-daemonset".to_owned());
        ds.metadata.namespace = Some("gpu-operator".to_owned());
        ds.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "nvidia.com/v1".to_owned(),
            kind: "ClusterPolicy".to_owned(),
            name: "cluster-policy".to_owned(),
            uid: "u".to_owned(),
            ..OwnerReference::default()
        }]);
        assert_eq!(
            owner_of::<ClusterPolicy, _>(Arc::new(ds.clone())),
            Some(ObjectRef::from_obj(&policy)),
            "no namespace: the same key as the ClusterPolicy's own events"
        );
        let mut user = ConfigMap::default();
        user.metadata.namespace = Some("gpu-operator".to_owned());
        assert_eq!(
            owner_of::<ClusterPolicy, _>(Arc::new(user)),
            None,
            "not ours"
        );
        assert_eq!(
            owner_of::<crate::pipeline::test_pool::Pool, _>(Arc::new(ds)),
            None,
            "owned by a ClusterPolicy, not by a pool of the same name"
        );
    }

    #[tokio::test]
    async fn changes_pass_new_and_changed_objects_and_every_deletion() {
        let node = |labels: &[(&str, &str)], deleted: bool| {
            let mut map = ConfigMap::default();
            map.metadata.name = Some("gpu-a".to_owned());
            map.metadata.labels = Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            );
            map.metadata.deletion_timestamp =
                deleted.then_some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                ));
            Arc::new(map)
        };
        let input = futures::stream::iter([
            node(&[("a", "1")], false),
            node(&[("a", "1")], false), // same fingerprint: dropped
            node(&[("a", "2")], false),
            node(&[("a", "2")], true),  // deleted, same fingerprint: passed
            node(&[("a", "2")], false), // created again: new
        ]);
        let passed: Vec<(String, bool)> = changes(input, |m: &ConfigMap, h| m.labels().hash(h))
            .map(|m| {
                (
                    m.labels()["a"].clone(),
                    m.metadata.deletion_timestamp.is_some(),
                )
            })
            .collect()
            .await;
        assert_eq!(
            passed,
            [
                ("1".to_owned(), false),
                ("2".to_owned(), false),
                ("2".to_owned(), true),
                ("2".to_owned(), false)
            ]
        );
    }
}
