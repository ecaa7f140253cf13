//! The ClusterPolicy the bench creates (`--policy`, default `manifests/examples/minimal.yaml`),
//! with `--policy-patch` (a JSON merge patch, RFC 7386) applied, so both operators of a side by
//! side get the same policy: NVIDIA's sample with its driver off, say.

use std::path::Path;

use anyhow::Context as _;
use gpu_operator_api::ClusterPolicy;
use serde_json::Value;

/// The policy the bench creates when `--policy` is not given (relative to the repository root).
pub const DEFAULT: &str = "manifests/examples/minimal.yaml";

/// The policy to create, and how the report names it.
#[derive(Clone, Debug)]
pub struct Policy {
    pub object: ClusterPolicy,
    pub label: String,
}

/// Reads the policy in `file` and applies the merge patch `edit` to it.
pub fn load(file: &Path, edit: Option<&str>) -> anyhow::Result<Policy> {
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("--policy {}: cannot read it", file.display()))?;
    let mut value: Value = serde_yaml::from_str(&text)
        .with_context(|| format!("--policy {}: not a YAML document", file.display()))?;
    let mut label = format!("`{}`", file.display());
    if let Some(edit) = edit {
        let patch: Value = serde_json::from_str(edit).with_context(|| {
            format!("--policy-patch `{edit}`: not JSON (give a merge patch such as '{{\"spec\":{{\"driver\":{{\"enabled\":false}}}}}}')")
        })?;
        merge(&mut value, &patch);
        label = format!("{label} with `{patch}`");
    }
    let object = serde_json::from_value(value)
        .with_context(|| format!("--policy {}: not a ClusterPolicy", file.display()))?;
    Ok(Policy { object, label })
}

/// Applies the JSON merge patch `patch` to `target` (RFC 7386: objects merge key by key, `null`
/// removes a key, anything else replaces).
fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(serde_json::Map::new());
    }
    if let Value::Object(object) = target {
        for (key, value) in patch {
            if value.is_null() {
                object.remove(key);
            } else {
                merge(object.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_merge_patch_merges_objects_replaces_the_rest_and_removes_nulls() {
        let mut target =
            json!({"spec": {"driver": {"enabled": true, "version": "1"}, "gfd": {}, "list": [1]}});
        merge(
            &mut target,
            &json!({"spec": {"driver": {"enabled": false}, "gfd": null, "list": [2], "new": {"a": 1}}}),
        );
        assert_eq!(
            target,
            json!({"spec": {"driver": {"enabled": false, "version": "1"}, "list": [2], "new": {"a": 1}}})
        );
    }

    #[test]
    fn the_default_policy_loads_and_a_bad_patch_is_refused_with_an_example() {
        let path = gpu_operator_harness::crd::repo_root().join(DEFAULT);
        let policy = load(&path, Some(r#"{"spec":{"driver":{"enabled":false}}}"#)).unwrap();
        assert_eq!(policy.object.spec.driver.enabled, Some(false));
        assert!(policy.label.contains("minimal.yaml"), "{}", policy.label);
        let error = load(&path, Some("driver.enabled=false")).unwrap_err();
        assert!(
            format!("{error:#}").contains("merge patch such as"),
            "{error:#}"
        );
    }
}
