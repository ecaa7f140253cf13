//! Metadata every object the operator creates carries: NVIDIA's `app` label, the recommended
//! `app.kubernetes.io/*` labels, and a controller owner reference to the owner.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

/// Value of `app.kubernetes.io/managed-by` on everything we create; the selector of our caches
/// and of pruning.
pub const MANAGED_BY: &str = "gpu-operator";
/// Label key `app.kubernetes.io/managed-by`.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// Label key `app.kubernetes.io/component`: the reconciler that owns the object.
pub const COMPONENT_LABEL: &str = "app.kubernetes.io/component";
/// Label key `app.kubernetes.io/name`, on everything we render (NVIDIA's objects lack it).
pub const NAME_LABEL: &str = "app.kubernetes.io/name";
/// Label key of NVIDIA's `app=<name>` labels, used by DaemonSet selectors and users' tooling.
pub const APP_LABEL: &str = "app";

/// Whether `object` is one we manage (carries our `managed-by` label).
pub fn is_managed(object: &impl kube::Resource) -> bool {
    object
        .meta()
        .labels
        .as_ref()
        .and_then(|l| l.get(MANAGED_BY_LABEL))
        .map(String::as_str)
        == Some(MANAGED_BY)
}

/// Label selector of the objects one reconciler (`component`) manages.
pub fn component_selector(component: &str) -> String {
    format!("{MANAGED_BY_LABEL}={MANAGED_BY},{COMPONENT_LABEL}={component}")
}

/// The labels of an object named `app` owned by the reconciler `component`.
pub fn labels(app: &str, component: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (APP_LABEL.to_owned(), app.to_owned()),
        (NAME_LABEL.to_owned(), app.to_owned()),
        (COMPONENT_LABEL.to_owned(), component.to_owned()),
        (MANAGED_BY_LABEL.to_owned(), MANAGED_BY.to_owned()),
        (
            "app.kubernetes.io/part-of".to_owned(),
            "gpu-operator".to_owned(),
        ),
    ])
}

/// A controller owner reference to `owner` (a ClusterPolicy, …), so deleting it garbage-collects
/// what we created for it.
pub fn owner_reference<K: kube::Resource<DynamicType = ()>>(owner: &K) -> Option<OwnerReference> {
    owner.controller_owner_ref(&()).map(|mut owner| {
        owner.block_owner_deletion = Some(true);
        owner
    })
}
