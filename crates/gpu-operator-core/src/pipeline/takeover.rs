//! Taking ownership of an object another client wrote (NVIDIA's GPU Operator writes with plain
//! updates, as field manager `gpu-operator`) before our first server-side apply to it.
//!
//! Server-side apply removes only the fields the applying manager owned and no longer sends: the
//! fields NVIDIA's operator set and we do not render (an init container, a volume of a ConfigMap
//! we do not create, an env variable) would stay in the object for good, beside ours. So, as
//! `kubectl apply --server-side` does when it upgrades a client-side-applied object, every field
//! other managers own (status subresources aside) is first handed to our apply manager by
//! rewriting `metadata.managedFields`; the apply that follows then leaves exactly our fields.

use std::fmt::Debug;

use kube::{
    Api, Resource,
    api::{Patch, PatchParams},
};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::{Error, pipeline::apply::FIELD_MANAGER_PREFIX};

/// Makes `manager` (an apply manager of ours) own every field of object `name` that a manager
/// not of ours owns; returns whether `metadata.managedFields` was rewritten. A missing object,
/// or one only we (and status writers) manage, is left alone. The rewrite is conditional on the
/// object's resource version; when the object changed in between (a racing reconcile took it
/// over already), it is read again, a few times.
pub async fn take_over<K>(api: &Api<K>, name: &str, manager: &str) -> Result<bool, Error>
where
    K: Resource<DynamicType = ()> + DeserializeOwned + Clone + Debug,
{
    let what = format!("{} {name}", K::kind(&()));
    let mut attempts = 0;
    loop {
        attempts += 1;
        match try_take_over(api, name, manager, &what).await {
            Err(kube::Error::Api(status)) if status.is_conflict() && attempts < 4 => {}
            Err(error) => {
                return Err(Error::kube(format!("taking over the fields of {what}"))(
                    error,
                ));
            }
            Ok(done) => return Ok(done),
        }
    }
}

async fn try_take_over<K>(
    api: &Api<K>,
    name: &str,
    manager: &str,
    what: &str,
) -> Result<bool, kube::Error>
where
    K: Resource<DynamicType = ()> + DeserializeOwned + Clone + Debug,
{
    let Some(live) = api.get_opt(name).await? else {
        return Ok(false);
    };
    let meta = live.meta();
    let entries: Vec<Value> = meta
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|entry| serde_json::to_value(entry).ok())
        .collect();
    let Some(rewritten) = transferred(&entries, manager) else {
        return Ok(false);
    };
    let patch = json!({"metadata": {
        "resourceVersion": meta.resource_version,
        "managedFields": rewritten,
    }});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    tracing::info!(object = %what, manager, "took over the fields another manager set");
    Ok(true)
}

/// The managed fields with every entry of a foreign manager (not `gpu-operator/…`, not a
/// subresource) folded into `manager`'s apply entry; `None` when there is no such entry.
pub fn transferred(entries: &[Value], manager: &str) -> Option<Vec<Value>> {
    let foreign = |entry: &Value| {
        let name = entry["manager"].as_str().unwrap_or_default();
        let subresource = entry["subresource"].as_str().unwrap_or_default();
        !name.starts_with(FIELD_MANAGER_PREFIX) && subresource.is_empty()
    };
    let mine = |entry: &Value| {
        entry["manager"].as_str() == Some(manager) && entry["operation"].as_str() == Some("Apply")
    };
    if !entries.iter().any(foreign) {
        return None;
    }
    let mut fields = json!({});
    let mut api_version = Value::Null;
    for entry in entries.iter().filter(|e| foreign(e) || mine(e)) {
        merge(&mut fields, &entry["fieldsV1"]);
        if api_version.is_null() || mine(entry) {
            api_version = entry["apiVersion"].clone();
        }
    }
    let mut kept: Vec<Value> = entries
        .iter()
        .filter(|e| !foreign(e) && !mine(e))
        .cloned()
        .collect();
    kept.push(json!({
        "manager": manager,
        "operation": "Apply",
        "apiVersion": api_version,
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    }));
    Some(kept)
}

/// Adds every key of the field set `from` to `into` (field sets are trees of objects).
fn merge(into: &mut Value, from: &Value) {
    if let (Value::Object(into), Value::Object(from)) = (into, from) {
        for (key, value) in from {
            merge(into.entry(key.clone()).or_insert_with(|| json!({})), value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Shaped as the API server reports the managed fields of NVIDIA's device plugin DaemonSet
    // after our first apply: NVIDIA's update, ours, the controller's status.
    fn entries() -> Vec<Value> {
        vec![
            json!({"manager": "gpu-operator", "operation": "Update", "apiVersion": "apps/v1", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:template": {"f:spec": {"f:volumes": {"k:{\"name\":\"nvidia-device-plugin-entrypoint\"}": {".": {}}}}}}}}),
            json!({"manager": "gpu-operator/device-plugin", "operation": "Apply", "apiVersion": "apps/v1", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:template": {"f:spec": {"f:volumes": {"k:{\"name\":\"device-plugin\"}": {".": {}}}}}}}}),
            json!({"manager": "kube-controller-manager", "operation": "Update", "subresource": "status", "apiVersion": "apps/v1",
                "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:numberReady": {}}}}),
        ]
    }

    #[test]
    fn foreign_fields_move_to_our_apply_entry_and_status_stays() {
        let out = transferred(&entries(), "gpu-operator/device-plugin").unwrap();
        assert_eq!(out.len(), 2, "{out:#?}");
        assert_eq!(out[0]["manager"], "kube-controller-manager");
        let ours = &out[1];
        assert_eq!(ours["manager"], "gpu-operator/device-plugin");
        assert_eq!(ours["operation"], "Apply");
        let volumes = &ours["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:volumes"];
        assert!(volumes["k:{\"name\":\"nvidia-device-plugin-entrypoint\"}"].is_object());
        assert!(volumes["k:{\"name\":\"device-plugin\"}"].is_object());
    }

    #[test]
    fn an_object_only_we_manage_is_left_alone() {
        let ours: Vec<Value> = entries().into_iter().skip(1).collect();
        assert!(transferred(&ours, "gpu-operator/device-plugin").is_none());
        let other_reconciler = transferred(&entries()[..1], "gpu-operator/driver").unwrap();
        assert_eq!(other_reconciler.len(), 1, "a new entry for the reconciler");
    }
}
