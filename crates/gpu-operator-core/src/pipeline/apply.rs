//! Writing children with server-side apply, but only when the live object differs from what we
//! render, and pruning the children a reconciler no longer renders.
//!
//! "Differs" is a subset test: every field we set must have the same value in the live object
//! (fields the API server defaults, or other managers add, are ignored). A hand edit of one of our
//! fields therefore fails the test and is reverted; an unchanged cluster gets no request at all.
//! The first write to an object someone else made takes its fields over first
//! ([`crate::pipeline::takeover`]).

use std::fmt::Debug;

use kube::{
    Api, Resource, ResourceExt as _,
    api::{DeleteParams, Patch, PatchParams},
};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::Value;

use crate::Error;

/// Field manager prefix of every reconciler: `gpu-operator/<reconciler>`.
pub const FIELD_MANAGER_PREFIX: &str = "gpu-operator/";

/// What [`apply`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The live object already matched; no request was sent.
    Unchanged,
    /// The object was created or updated.
    Written,
}

/// Applies `desired` unless `live` already has every field of it.
pub async fn apply<K>(
    api: &Api<K>,
    desired: &K,
    live: Option<&K>,
    reconciler: &str,
) -> Result<Outcome, Error>
where
    K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Clone + Debug,
{
    let name = desired.name_any();
    let what = format!("{} {name}", K::kind(&()));
    let desired_json = serde_json::to_value(desired).map_err(|source| Error::Serialize {
        what: what.clone(),
        source,
    })?;
    if let Some(live) = live {
        let live_json = serde_json::to_value(live).map_err(|source| Error::Serialize {
            what: what.clone(),
            source,
        })?;
        if is_subset(&desired_json, &live_json) {
            return Ok(Outcome::Unchanged);
        }
    }
    let manager = format!("{FIELD_MANAGER_PREFIX}{reconciler}");
    let foreign = !live.is_some_and(|live| is_ours(live, reconciler));
    let grants = grants_rules::<K>();
    if foreign && !grants {
        crate::pipeline::takeover::take_over(api, &name, &manager).await?;
    }
    let params = PatchParams::apply(&manager).force();
    let send = || async {
        api.patch(&name, &params, &Patch::Apply(&desired_json))
            .await
            .map_err(Error::kube(format!("applying {what}")))
    };
    send().await?;
    // A Role of NVIDIA's grants what we do not hold (OpenShift's SCC `use`), and the API server
    // refuses any write to a Role whose rules the writer does not hold, even one that only
    // rewrites managedFields. Its `rules` are an atomic list, so our apply replaces them whole:
    // the take-over then passes, and a second apply drops what else NVIDIA set.
    if foreign && grants && crate::pipeline::takeover::take_over(api, &name, &manager).await? {
        send().await?;
    }
    Ok(Outcome::Written)
}

/// Whether `K` is a Role or ClusterRole, whose writers must hold every rule it grants.
fn grants_rules<K: Resource<DynamicType = ()>>() -> bool {
    matches!(K::kind(&()).as_ref(), "Role" | "ClusterRole")
}

/// Whether `live` carries the labels we give what `reconciler` renders (see
/// [`crate::build::meta::labels`]); anything else (NVIDIA's objects lack `app.kubernetes.io/name`)
/// is taken over before the first write (see [`crate::pipeline::takeover`]).
fn is_ours<K: Resource>(live: &K, reconciler: &str) -> bool {
    let labels = live.labels();
    crate::build::meta::is_managed(live)
        && labels
            .get(crate::build::meta::COMPONENT_LABEL)
            .map(String::as_str)
            == Some(reconciler)
        && labels.contains_key(crate::build::meta::NAME_LABEL)
}

/// What becomes of a deleted object's dependents (a DaemonSet's pods).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dependents {
    /// Deleted with it, in the background (the API's default).
    Deleted,
    /// Left running without an owner (orphan propagation): the driver's pods when another owner
    /// takes the driver over, whose new pods wait for them to go.
    LeftRunning,
}

/// Deletes `name` with its `dependents` rule; an object that is already gone is fine.
pub async fn delete<K>(api: &Api<K>, name: &str, dependents: Dependents) -> Result<(), Error>
where
    K: Resource<DynamicType = ()> + DeserializeOwned + Clone + Debug,
{
    let what = format!("deleting {} {name}", K::kind(&()));
    let params = match dependents {
        Dependents::Deleted => DeleteParams::background(),
        Dependents::LeftRunning => DeleteParams::orphan(),
    };
    match api.delete(name, &params).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
        Err(error) => Err(Error::kube(what)(error)),
    }
}

/// Whether every field of `desired` has the same value in `live`. Lists must have the same length
/// and match element by element; empty objects, lists and strings match an absent field (the API
/// server leaves out empty `omitempty` fields, such as an env variable's empty `value`, on read).
pub fn is_subset(desired: &Value, live: &Value) -> bool {
    match (desired, live) {
        (Value::Object(d), Value::Object(l)) => d.iter().all(|(key, value)| match l.get(key) {
            Some(live_value) => is_subset(value, live_value),
            None => is_empty(value),
        }),
        (Value::Array(d), Value::Array(l)) => {
            d.len() == l.len() && d.iter().zip(l).all(|(a, b)| is_subset(a, b))
        }
        (d, Value::Null) => is_empty(d),
        (d, l) => d == l,
    }
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Object(map) => map.is_empty(),
        Value::Array(items) => items.is_empty(),
        Value::String(text) => text.is_empty(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn defaulted_and_foreign_fields_do_not_count_as_differences() {
        let desired = json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "x"}], "volumes": []}}}});
        let live = json!({"spec": {"revisionHistoryLimit": 10, "template": {"spec": {"containers": [{"name": "a", "image": "x", "imagePullPolicy": "IfNotPresent"}], "dnsPolicy": "ClusterFirst"}}}});
        assert!(is_subset(&desired, &live));
    }

    #[test]
    fn a_changed_or_removed_field_is_a_difference() {
        let desired = json!({"spec": {"containers": [{"name": "a", "env": [{"name": "MIG_STRATEGY", "value": "single"}]}]}});
        let edited = json!({"spec": {"containers": [{"name": "a", "env": [{"name": "MIG_STRATEGY", "value": "mixed"}]}]}});
        let extra = json!({"spec": {"containers": [{"name": "a", "env": [{"name": "MIG_STRATEGY", "value": "single"}, {"name": "X"}]}]}});
        let missing = json!({"spec": {"containers": [{"name": "a"}]}});
        assert!(!is_subset(&desired, &edited));
        assert!(
            !is_subset(&desired, &extra),
            "a list with more entries differs"
        );
        assert!(!is_subset(&desired, &missing));
    }

    #[test]
    fn an_empty_string_matches_an_absent_field_as_the_api_server_stores_it() {
        let desired =
            json!({"env": [{"name": "KUBECONFIG", "value": ""}, {"name": "SIGNAL", "value": ""}]});
        let live = json!({"env": [{"name": "KUBECONFIG"}, {"name": "SIGNAL", "value": null}]});
        assert!(is_subset(&desired, &live));
        let set = json!({"env": [{"name": "KUBECONFIG", "value": "/k"}, {"name": "SIGNAL"}]});
        assert!(
            !is_subset(&desired, &set),
            "a value someone set differs from an empty one"
        );
        assert!(
            !is_subset(&json!({"value": "1"}), &json!({})),
            "a non-empty value is not absent"
        );
        assert!(
            !is_subset(&json!({"replicas": 0}), &json!({})),
            "zero is a value, not an empty field"
        );
    }
}
