//! ConfigMaps users name in the ClusterPolicy (`devicePlugin.config.name`,
//! `migManager.config.name`). NVIDIA's operands mount them as they are, so a bad edit reaches the
//! nodes unchecked and a pod that restarts crash-loops on it. Ours mount a copy the operator owns:
//! every key is checked first, the copy is written only when all of them pass, and otherwise the
//! operand's reconcile fails with an error naming the ConfigMap, the key and the field. The
//! operands keep running — and restarting — with the last good configuration. A digest of the copy
//! lets operands that read their configuration only at start roll when it changes.

use std::{collections::BTreeMap, sync::Arc};

use k8s_openapi::{api::core::v1::ConfigMap, apimachinery::pkg::apis::meta::v1::ObjectMeta};

use crate::Error;

/// The ConfigMaps of the operator namespace by name (what validation's
/// [`crate::contract::Cluster`] holds as `config_maps`).
pub type ConfigMaps<'a> = &'a (dyn Fn(&str) -> Option<Arc<ConfigMap>> + Sync);

/// The most one key's value may hold. A device-plugin or mig-parted configuration is a few KiB
/// (NVIDIA's default mig-parted configuration, every GPU's layouts, about 30 KiB); a value near the
/// API server's 1 MiB ConfigMap limit is a mistake, refused before it is parsed.
pub const MAX_VALUE_BYTES: usize = 256 * 1024;

/// Where a checked copy comes from and what it must hold.
#[derive(Clone, Copy, Debug)]
pub struct Source<'a> {
    /// The ClusterPolicy field that names the ConfigMap, such as `devicePlugin.config.name`.
    pub field: &'a str,
    /// The ConfigMap's name, in the operator namespace.
    pub name: &'a str,
    /// A key the ConfigMap must have, with why and the fix (such as "devicePlugin.config.default
    /// names it: add it or change devicePlugin.config.default"), if any.
    pub required_key: Option<(&'a str, &'a str)>,
}

/// A user's configuration that passed its checks, ready to be written as the operand's copy.
#[derive(Clone, Debug, PartialEq)]
pub struct Checked {
    /// The copy to apply (named, not yet namespaced or owned).
    pub config_map: ConfigMap,
    /// A digest of the copy's data, for a pod-template annotation.
    pub digest: String,
    /// What the checks accepted but the operand would ignore, each naming its key.
    pub warnings: Vec<String>,
}

/// Checks one key's value of the ConfigMap: the warnings it deserves, or why the operand would
/// reject it (naming the field inside the value).
pub type Check<'a> = &'a dyn Fn(&str, &str) -> Result<Vec<String>, String>;

/// Reads `source` from the operator namespace (`namespace`, whose ConfigMaps `config_maps` finds
/// by name) and checks each key with `check`; the copy is named `copy`. Every problem is reported
/// at once, in key order.
pub fn check(
    namespace: &str,
    config_maps: ConfigMaps<'_>,
    source: Source<'_>,
    copy: &str,
    check: Check<'_>,
) -> Result<Checked, Error> {
    let where_ = format!(
        "ConfigMap {}/{} (named by {})",
        namespace, source.name, source.field
    );
    let Some(config_map) = config_maps(source.name) else {
        return Err(Error::InvalidConfig(format!(
            "{where_} does not exist: create it in namespace {namespace} or fix {}",
            source.field
        )));
    };
    let data = config_map.data.clone().unwrap_or_default();
    if data.is_empty() {
        return Err(Error::InvalidConfig(format!(
            "{where_} has no data: add at least one configuration key"
        )));
    }
    let mut errors = Vec::new();
    if let Some((key, advice)) = source.required_key
        && !data.contains_key(key)
    {
        errors.push(format!("no key {key:?} (keys: {}): {advice}", keys(&data)));
    }
    let mut warnings = Vec::new();
    for (key, value) in &data {
        if value.len() > MAX_VALUE_BYTES {
            errors.push(format!(
                "key {key:?}: {} KiB, more than the {} KiB a configuration may hold: split it \
                 into several keys",
                value.len() / 1024,
                MAX_VALUE_BYTES / 1024
            ));
            continue;
        }
        match check(key, value) {
            Ok(found) => warnings.extend(
                found
                    .into_iter()
                    .map(|w| format!("{where_} key {key:?}: {w}")),
            ),
            Err(error) => errors.push(format!("key {key:?}: {error}")),
        }
    }
    if !errors.is_empty() {
        return Err(Error::InvalidConfig(format!(
            "{where_} is not used, the operands keep their last good configuration: {}",
            errors.join("; ")
        )));
    }
    Ok(Checked {
        digest: digest(&data),
        config_map: ConfigMap {
            metadata: ObjectMeta {
                name: Some(copy.to_owned()),
                ..ObjectMeta::default()
            },
            data: Some(data),
            ..ConfigMap::default()
        },
        warnings,
    })
}

fn keys(data: &BTreeMap<String, String>) -> String {
    data.keys()
        .map(|k| format!("{k:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A stable digest of `data` (keys are ordered).
fn digest(data: &BTreeMap<String, String>) -> String {
    crate::build::digest::of(serde_json::json!(data).to_string().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(
        data: Option<&[(&str, &str)]>,
        required_key: Option<(&str, &str)>,
    ) -> Result<Checked, Error> {
        let config_map = data.map(|pairs| {
            Arc::new(ConfigMap {
                data: Some(
                    pairs
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect(),
                ),
                ..ConfigMap::default()
            })
        });
        let lookup = move |name: &str| config_map.clone().filter(|_| name == "plugin-configs");
        let source = Source {
            field: "devicePlugin.config.name",
            name: "plugin-configs",
            required_key,
        };
        let check = |_: &str, text: &str| match text {
            "bad" => Err("replicas: must be at least 2".to_owned()),
            "odd" => Ok(vec!["flags.renameByDefault: ignored here".to_owned()]),
            _ => Ok(Vec::new()),
        };
        super::check("gpu-operator", &lookup, source, "copy", &check)
    }

    #[test]
    fn a_good_config_map_is_copied_with_its_warnings_and_a_digest_of_its_data() {
        let checked = run(Some(&[("a", "good"), ("b", "odd")]), Some(("a", "needed"))).unwrap();
        assert_eq!(checked.config_map.metadata.name.as_deref(), Some("copy"));
        assert_eq!(checked.config_map.data.as_ref().unwrap()["b"], "odd");
        assert_eq!(checked.warnings.len(), 1);
        assert!(
            checked.warnings[0].contains("key \"b\": flags.renameByDefault"),
            "{:?}",
            checked.warnings
        );
        let other = run(Some(&[("a", "good"), ("b", "good")]), None).unwrap();
        assert_ne!(checked.digest, other.digest);
        assert_eq!(
            other.digest,
            run(Some(&[("b", "good"), ("a", "good")]), None)
                .unwrap()
                .digest
        );
    }

    #[test]
    fn a_missing_or_empty_config_map_names_the_field_that_points_at_it() {
        let error = run(None, None).unwrap_err();
        assert_eq!(error.category(), "InvalidConfig");
        let message = error.to_string();
        assert!(
            message.contains("gpu-operator/plugin-configs")
                && message.contains("does not exist")
                && message.contains("devicePlugin.config.name"),
            "{message}"
        );
        let message = run(Some(&[]), None).unwrap_err().to_string();
        assert!(message.contains("has no data"), "{message}");
    }

    #[test]
    fn every_bad_key_and_a_missing_default_are_reported_together() {
        let message = run(
            Some(&[("a", "bad"), ("b", "good"), ("c", "bad")]),
            Some(("z", "devicePlugin.config.default names it")),
        )
        .unwrap_err()
        .to_string();
        assert!(message.contains("last good configuration"), "{message}");
        assert!(
            message.contains(
                "no key \"z\" (keys: \"a\", \"b\", \"c\"): devicePlugin.config.default names it"
            ),
            "{message}"
        );
        assert!(
            message.contains("key \"a\": replicas: must be at least 2"),
            "{message}"
        );
        assert!(message.contains("key \"c\": replicas"), "{message}");
        assert!(!message.contains("key \"b\""), "{message}");
    }

    #[test]
    fn a_value_near_the_config_map_limit_is_refused_unparsed() {
        let huge = "good".repeat(250 * 1024);
        let message = run(Some(&[("a", &huge), ("b", "good")]), None)
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("key \"a\": 1000 KiB, more than the 256 KiB"),
            "{message}"
        );
        let fits = "good".repeat(60 * 1024);
        assert!(run(Some(&[("a", &fits)]), None).is_ok());
    }
}
