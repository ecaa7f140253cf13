//! How the pipeline writes what an operand renders ([`Children`]): each kind is
//! compared with its cache and applied only when it differs; what the operand no longer renders
//! (found by its `app.kubernetes.io/component` label, and of an owner kind that is no singleton
//! only among this owner's objects: [`prunes`]) is deleted — a pruned DaemonSet with its pods, or,
//! when the operand hands them over ([`Dependents`]), leaving its running pods to the owner (see
//! [`settle_handed_over_pods`]). A live DaemonSet's selector is
//! kept when our pods match it ([`crate::pipeline::adopt`]). The DRA kinds are written and pruned
//! at the version of `resource.k8s.io` the server serves ([`crate::dra_api`]). ServiceMonitors and
//! PrometheusRules, kinds the cluster may lack, are written by [`crate::build::service_monitor`]
//! and [`crate::build::prometheus_rule`].

use std::{borrow::Cow, collections::BTreeSet, fmt::Debug, sync::Arc};

use k8s_openapi::{
    api::{
        apps::v1::DaemonSet,
        core::v1::Pod,
        resource::v1::{DeviceClass, ResourceClaimTemplate},
    },
    apimachinery::pkg::apis::meta::v1::OwnerReference,
};
use kube::{
    Api, Resource, ResourceExt as _,
    api::{ListParams, Patch, PatchParams},
    runtime::reflector::{ObjectRef, Store},
};
use serde::{Serialize, de::DeserializeOwned};

use crate::{
    Context, Error,
    build::{meta, prometheus_rule, service_monitor},
    contract::{Children, Owner},
    dra_api::{self, DraApi, DraKind},
    pipeline::{
        adopt,
        apply::{self, Dependents, Outcome},
    },
};

/// Applies what changed and prunes what is no longer rendered for reconciler `component`;
/// returns how many objects were written or deleted. `monitored`: the reconciler may have
/// ServiceMonitors or PrometheusRules to prune even when it renders none. `pods`: what becomes of
/// the pods of the DaemonSets it prunes.
pub async fn apply_all<O: Owner>(
    ctx: &Context,
    owner: &O,
    component: &str,
    children: &Children,
    monitored: bool,
    pods: Dependents,
) -> Result<usize, Error> {
    let Children {
        service_accounts,
        roles,
        role_bindings,
        cluster_roles,
        cluster_role_bindings,
        config_maps,
        services,
        runtime_classes,
        admission_policies,
        admission_policy_bindings,
        device_classes,
        resource_claim_templates,
        daemonsets,
        deployments,
        service_monitors,
        prometheus_rules,
    } = children;
    let stores = &ctx.stores;
    let mut w = Writer {
        owner,
        component,
        written: 0,
        dependents: Dependents::Deleted,
    };
    w.kind(namespaced(ctx), service_accounts, &stores.service_accounts)
        .await?;
    w.kind(namespaced(ctx), roles, &stores.roles).await?;
    w.kind(namespaced(ctx), role_bindings, &stores.role_bindings)
        .await?;
    w.kind(cluster_wide(ctx), cluster_roles, &stores.cluster_roles)
        .await?;
    w.kind(
        cluster_wide(ctx),
        cluster_role_bindings,
        &stores.cluster_role_bindings,
    )
    .await?;
    w.kind(namespaced(ctx), config_maps, &stores.config_maps)
        .await?;
    w.kind(namespaced(ctx), services, &stores.services).await?;
    w.kind(cluster_wide(ctx), runtime_classes, &stores.runtime_classes)
        .await?;
    w.kind(
        cluster_wide(ctx),
        admission_policies,
        &stores.admission_policies,
    )
    .await?;
    w.kind(
        cluster_wide(ctx),
        admission_policy_bindings,
        &stores.admission_policy_bindings,
    )
    .await?;
    w.dra_kinds(ctx, device_classes, resource_claim_templates)
        .await?;
    let daemonsets: Vec<DaemonSet> = daemonsets
        .iter()
        .map(|ds| {
            let key = ObjectRef::new(&ds.name_any()).within(&ctx.namespace);
            adopt::keep_live_selector(ds.clone(), stores.daemonsets.get(&key).as_deref())
        })
        .collect();
    w.dependents = pods;
    let pruned = w
        .kind(namespaced(ctx), &daemonsets, &stores.daemonsets)
        .await?;
    if pods == Dependents::LeftRunning {
        w.written += settle_handed_over_pods(ctx, owner, &pruned).await?;
    }
    w.dependents = Dependents::Deleted;
    w.kind(namespaced(ctx), deployments, &stores.deployments)
        .await?;
    w.written +=
        service_monitor::apply_all(ctx, owner, component, service_monitors, monitored).await?;
    w.written +=
        prometheus_rule::apply_all(ctx, owner, component, prometheus_rules, monitored).await?;
    Ok(w.written)
}

/// Where objects of one kind live: their API and namespace (`None`: cluster-scoped).
struct Target<'a, K> {
    api: Api<K>,
    namespace: Option<&'a str>,
}

/// Objects in the operator namespace.
fn namespaced<K>(ctx: &Context) -> Target<'_, K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
{
    Target {
        api: Api::namespaced(ctx.client.clone(), &ctx.namespace),
        namespace: Some(&ctx.namespace),
    }
}

/// Cluster-scoped objects.
fn cluster_wide<K>(ctx: &Context) -> Target<'_, K>
where
    K: Resource<Scope = k8s_openapi::ClusterResourceScope, DynamicType = ()>,
{
    Target {
        api: Api::all(ctx.client.clone()),
        namespace: None,
    }
}

/// A `v1` DRA object as the `v1beta2` type it is written as.
fn served<K: DraKind>(object: &K) -> Result<Cow<'_, K::V1beta2>, Error> {
    dra_api::to_served(object).map(Cow::Owned)
}

/// Whether `owner` prunes a stale object of its component with `references`: an owner of a
/// singleton kind every one not controlled by an object of another kind (its own, an older
/// ClusterPolicy's, an orphan), an owner of another kind only its own (NVIDIADrivers render the
/// same component, each for its nodes).
fn prunes<O: Owner>(owner: &O, references: &[OwnerReference]) -> bool {
    let controller = references.iter().find(|r| r.controller == Some(true));
    match controller {
        None => O::SINGLETON,
        Some(r) if O::SINGLETON => r.kind == O::kind(&()) && r.api_version == O::api_version(&()),
        Some(r) => owner.meta().uid.as_deref() == Some(r.uid.as_str()),
    }
}

/// Writes one reconciler's objects for `owner`, counting its writes.
struct Writer<'a, O> {
    owner: &'a O,
    component: &'a str,
    written: usize,
    /// What becomes of the dependents of the objects of the kind it prunes now.
    dependents: Dependents,
}

impl<O: Owner> Writer<'_, O> {
    /// Applies `objects` of one kind and deletes the cached ones of this reconciler that are not
    /// among them; returns those it deleted.
    async fn kind<K>(
        &mut self,
        target: Target<'_, K>,
        objects: &[K],
        cache: &Store<K>,
    ) -> Result<Vec<Arc<K>>, Error>
    where
        K: Resource<DynamicType = ()> + Clone + Debug + Serialize + DeserializeOwned,
    {
        // Boxed: the object and the live one, held across the writes, are large (a DaemonSet).
        Box::pin(self.kind_at(target, objects, cache, |object| Ok(Cow::Borrowed(object)))).await
    }

    /// The DRA kinds, at the version of `resource.k8s.io` the server serves
    /// ([`crate::dra_api`]).
    async fn dra_kinds(
        &mut self,
        ctx: &Context,
        device_classes: &[DeviceClass],
        resource_claim_templates: &[ResourceClaimTemplate],
    ) -> Result<(), Error> {
        let stores = &ctx.stores;
        let (classes, templates) = (&stores.device_classes, &stores.resource_claim_templates);
        match ctx.server.dra_api_in_use() {
            DraApi::V1 => {
                self.kind(cluster_wide(ctx), device_classes, classes)
                    .await?;
                self.kind(namespaced(ctx), resource_claim_templates, templates)
                    .await?;
            }
            DraApi::V1beta2 => {
                self.kind_at(cluster_wide(ctx), device_classes, classes, served)
                    .await?;
                self.kind_at(namespaced(ctx), resource_claim_templates, templates, served)
                    .await?;
            }
        }
        Ok(())
    }

    /// [`Self::kind`] through the API of type `S` (a DRA kind at the served version), each
    /// object, rendered and cached, sent and compared as `written` makes it.
    async fn kind_at<K, S>(
        &mut self,
        Target { api, namespace }: Target<'_, S>,
        objects: &[K],
        cache: &Store<K>,
        written: for<'k> fn(&'k K) -> Result<Cow<'k, S>, Error>,
    ) -> Result<Vec<Arc<K>>, Error>
    where
        K: Resource<DynamicType = ()> + Clone,
        S: Resource<DynamicType = ()> + Clone + Debug + Serialize + DeserializeOwned,
    {
        let mut keep = BTreeSet::new();
        for object in objects {
            let mut object = object.clone();
            let meta = object.meta_mut();
            meta.namespace = namespace.map(str::to_owned);
            meta.owner_references = meta::owner_reference(self.owner).map(|owner| vec![owner]);
            let name = object.name_any();
            let key = ObjectRef::new(&name);
            let key = match namespace {
                Some(namespace) => key.within(namespace),
                None => key,
            };
            let live = cache.get(&key);
            let live = live.as_deref().map(written).transpose()?;
            if apply::apply(&api, &*written(&object)?, live.as_deref(), self.component).await?
                == Outcome::Written
            {
                self.written += 1;
            }
            keep.insert(name);
        }
        let stale: Vec<Arc<K>> = cache
            .state()
            .into_iter()
            .filter(|o| {
                o.labels().get(meta::COMPONENT_LABEL).map(String::as_str) == Some(self.component)
                    && !keep.contains(&o.name_any())
                    && prunes(self.owner, o.owner_references())
            })
            .collect();
        for object in &stale {
            apply::delete(&api, &object.name_any(), self.dependents).await?;
            self.written += 1;
        }
        Ok(stale)
    }
}

/// After handed-over DaemonSets `pruned` went with their pods left running, settles those pods:
/// each one a node runs gets `owner` as its controller, so no DaemonSet adopts it (the
/// ClusterPolicy's pool DaemonSets share one selector, and one adopting a pod on another pool's
/// node would delete it) and removing `owner` removes it; each one no node runs yet (waiting to
/// be scheduled), which nothing would replace and which would start beside the new owner's pod
/// once the running one goes, is deleted. Returns how many pods it wrote.
async fn settle_handed_over_pods<O: Owner>(
    ctx: &Context,
    owner: &O,
    pruned: &[Arc<DaemonSet>],
) -> Result<usize, Error> {
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    let keeper = meta::owner_reference(owner);
    let mut written = 0;
    for ds in pruned {
        let Some(labels) = ds
            .spec
            .as_ref()
            .and_then(|s| s.selector.match_labels.as_ref())
            .filter(|l| !l.is_empty())
        else {
            continue;
        };
        let selector: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let pods = api
            .list(&ListParams::default().labels(&selector.join(",")))
            .await
            .map_err(Error::kube(format!(
                "listing the pods of DaemonSet {}",
                ds.name_any()
            )))?;
        for pod in pods
            .items
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none() && was_controlled_by(p, ds))
        {
            let name = pod.name_any();
            let node = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
            tracing::info!(
                pod = %name,
                node = node.unwrap_or_default(),
                daemonset = %ds.name_any(),
                "handing a pod of a DaemonSet over ({})",
                if node.is_some() { "kept" } else { "deleted: no node ran it" }
            );
            if node.is_none() {
                apply::delete(&api, &name, Dependents::Deleted).await?;
            } else {
                let patch = serde_json::json!({"metadata": {"ownerReferences": [keeper]}});
                api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map_err(Error::kube(format!("handing driver pod {name} over")))?;
            }
            written += 1;
        }
    }
    Ok(written)
}

/// Whether `pod` is controlled by `ds`, or by nothing (the orphaning cleared its reference).
fn was_controlled_by(pod: &Pod, ds: &DaemonSet) -> bool {
    match pod
        .owner_references()
        .iter()
        .find(|r| r.controller == Some(true))
    {
        None => true,
        Some(r) => Some(&r.uid) == ds.metadata.uid.as_ref(),
    }
}

#[cfg(test)]
mod tests {
    use gpu_operator_api::{ClusterPolicy, ClusterPolicySpec, NvidiaDriver, NvidiaDriverSpec};

    use super::*;

    fn controlled_by<K: Resource<DynamicType = ()>>(uid: &str) -> Vec<OwnerReference> {
        vec![OwnerReference {
            api_version: K::api_version(&()).into_owned(),
            kind: K::kind(&()).into_owned(),
            name: "x".into(),
            uid: uid.into(),
            controller: Some(true),
            ..OwnerReference::default()
        }]
    }

    #[test]
    fn a_cluster_policy_prunes_every_stale_object_but_an_nvidia_drivers() {
        let policy = ClusterPolicy::new("p", ClusterPolicySpec::default());
        assert!(prunes(&policy, &[]));
        assert!(prunes(&policy, &controlled_by::<ClusterPolicy>("older")));
        assert!(!prunes(&policy, &controlled_by::<NvidiaDriver>("d1")));
    }

    #[test]
    fn a_handed_over_daemonsets_pods_are_its_own_and_the_orphans() {
        let mut ds = DaemonSet::default();
        ds.metadata.uid = Some("ds1".into());
        let pod = |references: Vec<OwnerReference>| {
            let mut pod = Pod::default();
            pod.metadata.owner_references = Some(references);
            pod
        };
        assert!(was_controlled_by(
            &pod(controlled_by::<DaemonSet>("ds1")),
            &ds
        ));
        assert!(was_controlled_by(&pod(Vec::new()), &ds), "orphaned");
        assert!(!was_controlled_by(
            &pod(controlled_by::<DaemonSet>("ds2")),
            &ds
        ));
        assert!(
            !was_controlled_by(&pod(controlled_by::<ClusterPolicy>("p")), &ds),
            "already handed over"
        );
    }

    #[test]
    fn an_nvidia_driver_prunes_only_its_own() {
        let mut driver = NvidiaDriver::new("a", NvidiaDriverSpec::default());
        driver.metadata.uid = Some("d1".into());
        assert!(prunes(&driver, &controlled_by::<NvidiaDriver>("d1")));
        assert!(!prunes(&driver, &controlled_by::<NvidiaDriver>("d2")));
        assert!(!prunes(&driver, &controlled_by::<ClusterPolicy>("p")));
        assert!(!prunes(&driver, &[]));
    }
}
