//! What another operator (NVIDIA's GPU Operator) created for an owner (the ClusterPolicy, …) and
//! this operator does not render: its operator-metrics Service, the entrypoint ConfigMaps of its
//! operand scripts, … Once every operand reconciler has applied the current generation of the
//! owner (so everything we render has been written, and so taken over), the objects still owned
//! by it that no field manager of ours ever wrote are deleted, and one Event names them. So are
//! the RuntimeClasses labelled `nvidia.com/kata-runtime-class=true`, owned or not: NVIDIA's
//! deprecated Kata manager made them, and NVIDIA's operator deletes them on every reconcile now
//! that the Kata manager is permanently off. Once per owner and process: an object someone adds
//! later is not ours to judge, and a converged operator sends no request for it.

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt::Debug,
    sync::{Mutex, PoisonError},
};

use k8s_openapi::{
    api::{
        apps::v1::DaemonSet,
        core::v1::{ConfigMap, Service, ServiceAccount},
        node::v1::RuntimeClass,
        rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding},
    },
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use kube::{
    Api, Resource, ResourceExt as _,
    api::{DeleteParams, ListParams},
    runtime::events::{Event, EventType},
};
use serde::de::DeserializeOwned;

use crate::{Context, Error, build::meta, contract::Owner, pipeline::apply};

/// Which operand reconcilers applied which generation of which owner, and which owners were
/// swept.
#[derive(Debug, Default)]
pub struct Sweeps {
    /// The generation applied, by owner uid and condition of the reconciler.
    applied: Mutex<BTreeMap<(String, String), Option<i64>>>,
    /// The uids of the owners swept.
    swept: Mutex<BTreeSet<String>>,
}

impl Sweeps {
    /// Records that the reconciler writing `condition` applied everything it renders for `owner`.
    pub fn applied<K: Owner>(&self, condition: &str, owner: &K) {
        let mut applied = self.applied.lock().unwrap_or_else(PoisonError::into_inner);
        applied.insert(
            (owner.uid().unwrap_or_default(), condition.to_owned()),
            owner.meta().generation,
        );
    }

    /// Whether `owner` is to be swept now: every reconciler of `conditions` applied its current
    /// generation, and it was not swept before.
    fn due<K: Owner>(&self, owner: &K, conditions: &[&str]) -> bool {
        let uid = owner.uid().unwrap_or_default();
        let applied = self.applied.lock().unwrap_or_else(PoisonError::into_inner);
        let swept = self.swept.lock().unwrap_or_else(PoisonError::into_inner);
        !swept.contains(&uid)
            && conditions.iter().all(|c| {
                applied.get(&(uid.clone(), (*c).to_owned())) == Some(&owner.meta().generation)
            })
    }

    fn done<K: Owner>(&self, owner: &K) {
        let mut swept = self.swept.lock().unwrap_or_else(PoisonError::into_inner);
        swept.insert(owner.uid().unwrap_or_default());
    }
}

/// Whether an object with `meta` is a leftover of the owner with uid `owner_uid`: owned by it,
/// never written by a field manager of ours, and without our labels.
pub fn is_leftover(meta: &ObjectMeta, owner_uid: &str) -> bool {
    let owned = meta
        .owner_references
        .iter()
        .flatten()
        .any(|owner| owner.uid == owner_uid);
    let written_by_us = meta.managed_fields.iter().flatten().any(|entry| {
        entry
            .manager
            .as_deref()
            .is_some_and(|m| m.starts_with(apply::FIELD_MANAGER_PREFIX))
    });
    let labelled_ours = meta
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(meta::NAME_LABEL))
        && meta
            .labels
            .as_ref()
            .and_then(|l| l.get(meta::MANAGED_BY_LABEL))
            .is_some_and(|v| v == meta::MANAGED_BY);
    owned && !written_by_us && !labelled_ours
}

/// The label of the RuntimeClasses NVIDIA's deprecated Kata manager created.
pub const KATA_RUNTIME_CLASS_LABEL: &str = "nvidia.com/kata-runtime-class";

/// Deletes the leftovers of `owner` once it is due (see the module documentation) and publishes
/// one Event naming them.
pub async fn sweep<K: Owner>(ctx: &Context, owner: &K, conditions: &[&str]) -> Result<(), Error> {
    if !ctx.sweeps.due(owner, conditions) {
        return Ok(());
    }
    let uid = owner.uid().unwrap_or_default();
    let ns = ctx.namespace.as_str();
    let c = &ctx.client;
    let mut removed = Vec::new();
    remove(
        Api::<ServiceAccount>::namespaced(c.clone(), ns),
        &uid,
        &mut removed,
    )
    .await?;
    remove(Api::<Role>::namespaced(c.clone(), ns), &uid, &mut removed).await?;
    remove(
        Api::<RoleBinding>::namespaced(c.clone(), ns),
        &uid,
        &mut removed,
    )
    .await?;
    remove(Api::<ClusterRole>::all(c.clone()), &uid, &mut removed).await?;
    remove(
        Api::<ClusterRoleBinding>::all(c.clone()),
        &uid,
        &mut removed,
    )
    .await?;
    remove(
        Api::<ConfigMap>::namespaced(c.clone(), ns),
        &uid,
        &mut removed,
    )
    .await?;
    remove(
        Api::<Service>::namespaced(c.clone(), ns),
        &uid,
        &mut removed,
    )
    .await?;
    remove(Api::<RuntimeClass>::all(c.clone()), &uid, &mut removed).await?;
    remove_kata_runtime_classes(Api::<RuntimeClass>::all(c.clone()), &mut removed).await?;
    remove(
        Api::<DaemonSet>::namespaced(c.clone(), ns),
        &uid,
        &mut removed,
    )
    .await?;
    ctx.sweeps.done(owner);
    if removed.is_empty() {
        return Ok(());
    }
    let note = format!(
        "removed {} object(s) a previous operator (NVIDIA's GPU Operator) created for this {} \
         and this operator does not use: {}",
        removed.len(),
        K::kind(&()),
        removed.join(", ")
    );
    tracing::info!(%note, "removed leftovers");
    let event = Event {
        type_: EventType::Normal,
        reason: "RemovedLeftovers".to_owned(),
        action: "Adopt".to_owned(),
        note: Some(crate::report::conditions::truncate(&note, 1024)),
        secondary: None,
    };
    if let Err(error) = ctx.recorder.publish(&event, &owner.object_ref(&())).await {
        tracing::warn!(%error, "could not publish an Event");
    }
    Ok(())
}

/// Deletes the RuntimeClasses of NVIDIA's deprecated Kata manager and notes them. The operator
/// may delete only the names NVIDIA's charts gave them (the chart's ClusterRole); one renamed in
/// `kataManager.config.runtimeClasses` is noted as kept, for the user to delete.
async fn remove_kata_runtime_classes(
    api: Api<RuntimeClass>,
    removed: &mut Vec<String>,
) -> Result<(), Error> {
    let selector = format!("{KATA_RUNTIME_CLASS_LABEL}=true");
    let list = api
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(Error::kube("listing Kata RuntimeClasses"))?;
    for name in list.items.iter().map(kube::ResourceExt::name_any) {
        match api.delete(&name, &DeleteParams::background()).await {
            Ok(_) => removed.push(format!("RuntimeClass {name}")),
            Err(kube::Error::Api(status)) if status.is_not_found() => {}
            Err(kube::Error::Api(status)) if status.is_forbidden() => removed.push(format!(
                "RuntimeClass {name} (NOT removed: this operator may delete only the names \
                 NVIDIA's charts give its Kata RuntimeClasses; delete it by hand)"
            )),
            Err(error) => return Err(Error::kube(format!("deleting RuntimeClass {name}"))(error)),
        }
    }
    Ok(())
}

/// Lists the objects of one kind, deletes the leftovers of the owner with `uid` among them, and
/// notes `Kind name`.
async fn remove<K>(api: Api<K>, uid: &str, removed: &mut Vec<String>) -> Result<(), Error>
where
    K: Resource<DynamicType = ()> + DeserializeOwned + Clone + Debug,
{
    let kind = K::kind(&());
    let list = api
        .list(&ListParams::default())
        .await
        .map_err(Error::kube(format!("listing {kind}s")))?;
    for object in list.items.iter().filter(|o| is_leftover(o.meta(), uid)) {
        apply::delete(&api, &object.name_any(), apply::Dependents::Deleted).await?;
        removed.push(format!("{kind} {}", object.name_any()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use gpu_operator_api::ClusterPolicy;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, OwnerReference};

    use super::*;

    fn meta(owner: &str, managers: &[&str], labels: &[(&str, &str)]) -> ObjectMeta {
        ObjectMeta {
            owner_references: Some(vec![OwnerReference {
                uid: owner.to_owned(),
                kind: "ClusterPolicy".to_owned(),
                ..OwnerReference::default()
            }]),
            managed_fields: Some(
                managers
                    .iter()
                    .map(|m| ManagedFieldsEntry {
                        manager: Some((*m).to_owned()),
                        ..ManagedFieldsEntry::default()
                    })
                    .collect(),
            ),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            ),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn what_nvidias_operator_alone_wrote_for_this_policy_is_a_leftover() {
        // NVIDIA's operator-metrics Service: its manager `gpu-operator`, label `app`.
        assert!(is_leftover(
            &meta("u1", &["gpu-operator"], &[("app", "gpu-operator")]),
            "u1"
        ));
        assert!(
            !is_leftover(&meta("u2", &["gpu-operator"], &[]), "u1"),
            "owned by another ClusterPolicy, or by none: not ours to judge"
        );
        assert!(
            !is_leftover(
                &meta("u1", &["gpu-operator", "gpu-operator/device-plugin"], &[]),
                "u1"
            ),
            "taken over by one of our reconcilers"
        );
        let ours = [
            ("app.kubernetes.io/name", "x"),
            ("app.kubernetes.io/managed-by", "gpu-operator"),
        ];
        assert!(!is_leftover(&meta("u1", &[], &ours), "u1"), "our labels");
    }

    #[test]
    fn a_policy_is_due_once_every_reconciler_applied_its_generation() {
        let mut policy = ClusterPolicy::new("p", gpu_operator_api::ClusterPolicySpec::default());
        policy.metadata.uid = Some("u1".to_owned());
        policy.metadata.generation = Some(2);
        let sweeps = Sweeps::default();
        sweeps.applied("DriverReady", &policy);
        assert!(!sweeps.due(&policy, &["DriverReady", "ToolkitReady"]));
        let mut older = policy.clone();
        older.metadata.generation = Some(1);
        sweeps.applied("ToolkitReady", &older);
        assert!(
            !sweeps.due(&policy, &["DriverReady", "ToolkitReady"]),
            "an older generation does not count"
        );
        sweeps.applied("ToolkitReady", &policy);
        assert!(sweeps.due(&policy, &["DriverReady", "ToolkitReady"]));
        sweeps.done(&policy);
        assert!(
            !sweeps.due(&policy, &["DriverReady", "ToolkitReady"]),
            "once"
        );
    }

    #[test]
    fn owners_of_one_kind_are_swept_apart() {
        use crate::pipeline::test_pool::Pool;
        let (a, b) = (Pool::new("a", "p1", None), Pool::new("b", "p2", None));
        let sweeps = Sweeps::default();
        sweeps.applied("DriverReady", &a);
        assert!(sweeps.due(&a, &["DriverReady"]));
        assert!(
            !sweeps.due(&b, &["DriverReady"]),
            "the same reconciler applied another pool"
        );
        sweeps.done(&a);
        sweeps.applied("DriverReady", &b);
        assert!(sweeps.due(&b, &["DriverReady"]));
    }
}
