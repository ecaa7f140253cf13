//! Whether a running driver pod already runs the driver its DaemonSet asks for, whatever the
//! revision of the template it was made from.
//!
//! The driver DaemonSet is `OnDelete`, so a pod keeps the template it was created with. A pod
//! needs replacing (a driver upgrade: cordon, evict, restart) only when what it installs differs:
//! for every container of the pod (the driver, and the sidecars that load kernel modules: peermem,
//! GDS, GDRCopy) its name, image, command, args, env (by name, without `DRIVER_CONFIG_DIGEST`,
//! which is a hash of these very fields) and envFrom, and the sources of its mounts (the host
//! path, ConfigMap or Secret behind each mount path; the volume's name is cosmetic). Everything
//! else — labels, annotations, tolerations, resources, probes, the `k8s-driver-manager` init
//! container, volume names — leaves the loaded driver as it is.
//!
//! This is stricter than NVIDIA's restart-only path (PR #2527: cordon and restart in place when
//! `DRIVER_CONFIG_DIGEST` is unchanged): a change that installs nothing new restarts nothing. It
//! is also what makes a switch from NVIDIA's operator restart no driver pod: after our operator
//! adopts `nvidia-driver-daemonset` its template is ours, so every pod is of an "old revision",
//! but a pod whose containers install the same driver is in sync. A pod made from the current
//! template (its `pod-template-generation` is the DaemonSet's generation) is in sync by
//! definition, even when an admission webhook rewrote its image or env.

use std::collections::BTreeMap;

use k8s_openapi::api::{
    apps::v1::DaemonSet,
    core::v1::{Container, Pod, PodSpec, Volume},
};
use serde_json::{Value, json};

use crate::digest;

/// Where the API server mounts a pod's ServiceAccount token.
const SERVICE_ACCOUNT_MOUNT: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

pub use gpu_operator_core::report::readiness::TEMPLATE_GENERATION_LABEL;

/// What the containers of a driver pod install, in a form that compares equal when the
/// installation is the same (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstallConfig(BTreeMap<String, Value>);

impl InstallConfig {
    /// The install configuration of pod spec `spec`.
    pub fn of(spec: &PodSpec) -> Self {
        let volumes: BTreeMap<&str, &Volume> = spec
            .volumes
            .iter()
            .flatten()
            .map(|v| (v.name.as_str(), v))
            .collect();
        Self(
            spec.containers
                .iter()
                .map(|c| (c.name.clone(), container(c, &volumes)))
                .collect(),
        )
    }
}

/// The install-relevant fields of container `c`, with each mount's volume replaced by its source.
fn container(c: &Container, volumes: &BTreeMap<&str, &Volume>) -> Value {
    let env: BTreeMap<&str, Value> = c
        .env
        .iter()
        .flatten()
        .filter(|e| e.name != digest::ENV)
        .map(|e| {
            let mut from = serde_json::to_value(&e.value_from).unwrap_or(Value::Null);
            drop_server_default(&mut from, "fieldRef", "apiVersion", &json!("v1"));
            (e.name.as_str(), json!([e.value, from]))
        })
        .collect();
    let mounts: BTreeMap<&str, Value> = c
        .volume_mounts
        .iter()
        .flatten()
        // The ServiceAccount admission plugin adds the token mount to pods, never to templates.
        .filter(|m| m.mount_path != SERVICE_ACCOUNT_MOUNT)
        .map(|m| {
            let source = volumes.get(m.name.as_str()).map(|v| source(v));
            (
                m.mount_path.as_str(),
                json!([source, m.sub_path, m.read_only, m.mount_propagation]),
            )
        })
        .collect();
    json!({
        "image": c.image,
        "command": c.command,
        "args": c.args,
        "env": env,
        "envFrom": c.env_from,
        "mounts": mounts,
    })
}

/// A volume without its name: where its data comes from.
fn source(volume: &Volume) -> Value {
    let mut value = serde_json::to_value(volume).unwrap_or(Value::Null);
    if let Some(object) = value.as_object_mut() {
        object.remove("name");
    }
    drop_server_default(&mut value, "hostPath", "type", &json!(""));
    for kind in ["configMap", "secret"] {
        drop_server_default(&mut value, kind, "defaultMode", &json!(420));
    }
    value
}

/// Removes `value[section][field]` when it holds the API server's default `default`, so a pod the
/// server defaulted (NVIDIA's, or any live one) compares equal to the template it came from.
fn drop_server_default(value: &mut Value, section: &str, field: &str, default: &Value) {
    if let Some(object) = value.get_mut(section).and_then(Value::as_object_mut)
        && object.get(field) == Some(default)
    {
        object.remove(field);
    }
}

impl InstallConfig {
    /// A short digest of this configuration, for caches that keep one per pod.
    pub fn fingerprint(&self) -> String {
        let text = serde_json::to_string(&self.0).unwrap_or_default();
        gpu_operator_core::build::digest::of(text.as_bytes())
    }
}

/// The install fingerprint of the template of `ds` (`None` without a template).
pub fn template_fingerprint(ds: &DaemonSet) -> Option<String> {
    let template = ds.spec.as_ref()?.template.spec.as_ref()?;
    Some(InstallConfig::of(template).fingerprint())
}

/// Whether a driver pod made from template generation `pod_generation` with install
/// fingerprint `pod_fingerprint` runs what `ds` (whose template fingerprint is `desired`) asks
/// for (see the module docs).
pub fn in_sync(
    ds: &DaemonSet,
    desired: Option<&str>,
    pod_generation: Option<&str>,
    pod_fingerprint: Option<&str>,
) -> bool {
    let generation = ds.metadata.generation.map(|g| g.to_string());
    if generation.is_some() && pod_generation == generation.as_deref() {
        return true;
    }
    desired.is_some() && desired == pod_fingerprint
}

/// Whether driver pod `pod` runs what DaemonSet `ds` asks for (see the module docs).
pub fn pod_in_sync(ds: &DaemonSet, pod: &Pod) -> bool {
    let pod_generation = pod
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(TEMPLATE_GENERATION_LABEL));
    let fingerprint = pod
        .spec
        .as_ref()
        .map(|spec| InstallConfig::of(spec).fingerprint());
    in_sync(
        ds,
        template_fingerprint(ds).as_deref(),
        pod_generation.map(String::as_str),
        fingerprint.as_deref(),
    )
}

#[cfg(test)]
mod tests;
