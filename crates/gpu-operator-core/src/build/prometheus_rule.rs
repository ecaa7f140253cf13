//! PrometheusRules of the Prometheus Operator (`monitoring.coreos.com/v1`), the other optional
//! kind next to ServiceMonitors: whether their CRD is installed comes from its own one-object
//! cache, and they are written by the same list-compare-apply-prune writer as ServiceMonitors
//! ([`crate::build::service_monitor`]), so a missing CRD costs no request and breaks no cache.

use std::collections::BTreeMap;

use kube::api::ApiResource;
pub use kube::api::DynamicObject;
use serde_json::Value;

use crate::{Context, Error, build::service_monitor, cache::stores::Stores};

/// Name of the PrometheusRule CRD.
pub const CRD_NAME: &str = crate::cache::stores::PROMETHEUS_RULE_CRD;

/// The PrometheusRule kind, for dynamic API access.
pub fn api_resource() -> ApiResource {
    ApiResource {
        group: "monitoring.coreos.com".to_owned(),
        version: "v1".to_owned(),
        api_version: "monitoring.coreos.com/v1".to_owned(),
        kind: "PrometheusRule".to_owned(),
        plural: "prometheusrules".to_owned(),
    }
}

/// Whether the PrometheusRule CRD is installed (and not being deleted).
pub fn crd_installed(stores: &Stores) -> bool {
    stores
        .prometheus_rule_crds
        .state()
        .iter()
        .any(|crd| crd.metadata.deletion_timestamp.is_none())
}

/// A PrometheusRule `name` owned by reconciler `component`, labelled like every child (`app` =
/// `app`) plus `extra_labels`, with `spec` (its `groups`) as given.
pub fn build(
    name: &str,
    app: &str,
    component: &str,
    extra_labels: &BTreeMap<String, String>,
    spec: Value,
) -> DynamicObject {
    service_monitor::build_of(&api_resource(), name, app, component, extra_labels, spec)
}

/// Applies the PrometheusRules of reconciler `component` that differ from the live ones and
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
    service_monitor::apply_kind(
        ctx,
        owner,
        component,
        (&api_resource(), installed),
        desired,
        may_have_stale,
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_built_rule_has_its_kind_labels_and_groups() {
        let extra = BTreeMap::from([("release".to_owned(), "prometheus".to_owned())]);
        let rule = build("r", "app-r", "x", &extra, serde_json::json!({"groups": []}));
        let json = serde_json::to_value(&rule).unwrap();
        assert_eq!(json["apiVersion"], "monitoring.coreos.com/v1");
        assert_eq!(json["kind"], "PrometheusRule");
        assert_eq!(json["metadata"]["labels"]["app"], "app-r");
        assert_eq!(json["metadata"]["labels"]["release"], "prometheus");
        assert_eq!(json["spec"]["groups"], serde_json::json!([]));
    }
}
