//! ServiceMonitors of the Prometheus Operator (`monitoring.coreos.com/v1`), a kind the cluster may
//! not have. Whether its CRD is installed comes from a one-object cache (the CRD's metadata), so
//! nothing is asked of the API server while it is absent; once it is there, the ServiceMonitors an
//! operand renders are applied like the other children, compared with a label-selected list of
//! the live ones (a list, not a watch, so a missing CRD never breaks a cache), and the ones the
//! operand no longer renders are deleted. The same writer serves the Prometheus Operator's other
//! optional kind, PrometheusRules ([`crate::build::prometheus_rule`]).

use std::collections::BTreeMap;

pub use kube::api::DynamicObject;
use kube::{
    Api, ResourceExt as _,
    api::{ApiResource, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams},
};
use serde_json::Value;

use crate::{
    Context, Error,
    build::meta,
    cache::stores::Stores,
    pipeline::apply::{FIELD_MANAGER_PREFIX, is_subset},
};

/// Name of the ServiceMonitor CRD.
pub const CRD_NAME: &str = crate::cache::stores::SERVICE_MONITOR_CRD;

/// The ServiceMonitor kind, for dynamic API access.
pub fn api_resource() -> ApiResource {
    ApiResource {
        group: "monitoring.coreos.com".to_owned(),
        version: "v1".to_owned(),
        api_version: "monitoring.coreos.com/v1".to_owned(),
        kind: "ServiceMonitor".to_owned(),
        plural: "servicemonitors".to_owned(),
    }
}

/// Whether the ServiceMonitor CRD is installed (and not being deleted).
pub fn crd_installed(stores: &Stores) -> bool {
    stores
        .service_monitor_crds
        .state()
        .iter()
        .any(|crd| crd.metadata.deletion_timestamp.is_none())
}

/// A ServiceMonitor `name` owned by reconciler `component`, labelled like every child (`app` =
/// `app`) plus `extra_labels`, with `spec` as given.
pub fn build(
    name: &str,
    app: &str,
    component: &str,
    extra_labels: &BTreeMap<String, String>,
    spec: Value,
) -> DynamicObject {
    build_of(&api_resource(), name, app, component, extra_labels, spec)
}

/// An object of the optional kind `resource`, built like [`build`].
pub(crate) fn build_of(
    resource: &ApiResource,
    name: &str,
    app: &str,
    component: &str,
    extra_labels: &BTreeMap<String, String>,
    spec: Value,
) -> DynamicObject {
    let mut labels = meta::labels(app, component);
    labels.extend(extra_labels.iter().map(|(k, v)| (k.clone(), v.clone())));
    let data = serde_json::Map::from_iter([("spec".to_owned(), spec)]);
    let mut object = DynamicObject::new(name, resource).data(Value::Object(data));
    object.metadata = ObjectMeta {
        name: Some(name.to_owned()),
        labels: Some(labels),
        ..ObjectMeta::default()
    };
    object
}

/// Applies the ServiceMonitors of reconciler `component` that differ from the live ones and
/// deletes its live ones not in `desired`; returns how many were written or deleted. Sends
/// nothing while the CRD is absent, nor when `desired` is empty and `may_have_stale` is false.
pub(crate) async fn apply_all<K: kube::Resource<DynamicType = ()>>(
    ctx: &Context,
    owner: &K,
    component: &str,
    desired: &[DynamicObject],
    may_have_stale: bool,
) -> Result<usize, Error> {
    let installed = crd_installed(&ctx.stores);
    apply_kind(
        ctx,
        owner,
        component,
        (&api_resource(), installed),
        desired,
        may_have_stale,
    )
    .await
}

/// [`apply_all`] for the optional kind `resource`, whose CRD is `installed` or not.
pub(crate) async fn apply_kind<K: kube::Resource<DynamicType = ()>>(
    ctx: &Context,
    owner: &K,
    component: &str,
    (resource, installed): (&ApiResource, bool),
    desired: &[DynamicObject],
    may_have_stale: bool,
) -> Result<usize, Error> {
    if (desired.is_empty() && !may_have_stale) || !installed {
        return Ok(0);
    }
    let kind = &resource.kind;
    let api: Api<DynamicObject> =
        Api::namespaced_with(ctx.client.clone(), &ctx.namespace, resource);
    let selector = ListParams::default().labels(&meta::component_selector(component));
    let live = match api.list(&selector).await {
        Ok(list) => list.items,
        // The CRD went away since the cache saw it: so did every object of its kind.
        Err(kube::Error::Api(status)) if status.is_not_found() => return Ok(0),
        Err(error) => return Err(Error::kube(format!("listing {kind}s"))(error)),
    };
    let mut written = 0;
    let params = PatchParams::apply(&format!("{FIELD_MANAGER_PREFIX}{component}")).force();
    for object in desired {
        let name = object.name_any();
        let mut object = object.clone();
        object.metadata.namespace = Some(ctx.namespace.clone());
        object.metadata.owner_references = meta::owner_reference(owner).map(|o| vec![o]);
        let json = to_json(&object, kind, &name)?;
        let current = live.iter().find(|o| o.name_any() == name);
        if let Some(current) = current
            && is_subset(
                &without_types(&json),
                &without_types(&to_json(current, kind, &name)?),
            )
        {
            continue;
        }
        api.patch(&name, &params, &Patch::Apply(&json))
            .await
            .map_err(Error::kube(format!("applying {kind} {name}")))?;
        written += 1;
    }
    for stale in live
        .iter()
        .filter(|o| !desired.iter().any(|d| d.name_any() == o.name_any()))
    {
        let name = stale.name_any();
        match api.delete(&name, &DeleteParams::background()).await {
            Ok(_) => written += 1,
            Err(kube::Error::Api(status)) if status.is_not_found() => {}
            Err(error) => {
                return Err(Error::kube(format!("deleting {kind} {name}"))(error));
            }
        }
    }
    Ok(written)
}

fn to_json(object: &DynamicObject, kind: &str, name: &str) -> Result<Value, Error> {
    serde_json::to_value(object).map_err(|source| Error::Serialize {
        what: format!("{kind} {name}"),
        source,
    })
}

/// The object without `apiVersion` and `kind`, which list responses may leave out of items.
fn without_types(json: &Value) -> Value {
    let mut json = json.clone();
    if let Value::Object(map) = &mut json {
        map.remove("apiVersion");
        map.remove("kind");
    }
    json
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_built_service_monitor_has_its_kind_labels_and_spec() {
        let extra = BTreeMap::from([("release".to_owned(), "prometheus".to_owned())]);
        let sm = build(
            "nvidia-x",
            "nvidia-x",
            "x",
            &extra,
            serde_json::json!({"jobLabel": "app"}),
        );
        let json = serde_json::to_value(&sm).unwrap();
        assert_eq!(json["apiVersion"], "monitoring.coreos.com/v1");
        assert_eq!(json["kind"], "ServiceMonitor");
        assert_eq!(json["metadata"]["labels"]["app"], "nvidia-x");
        assert_eq!(json["metadata"]["labels"]["release"], "prometheus");
        assert_eq!(json["metadata"]["labels"][meta::COMPONENT_LABEL], "x");
        assert_eq!(json["spec"]["jobLabel"], "app");
        assert_eq!(
            without_types(&json).get("kind"),
            None,
            "types are not compared"
        );
    }
}
