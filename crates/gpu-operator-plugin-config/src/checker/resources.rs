//! The top-level `resources` section of a device plugin configuration: `gpus` and `mig` lists of
//! `{pattern, name}`. The plugin reads and checks them, then ignores them ("customizing the
//! resources field is not yet supported"), so any entry is a warning.

use serde_yaml::Value;

use super::Findings;
use super::names;
use super::walk::{self, Keys};

const RESOURCES: &[&str] = &["gpus", "mig"];
const RESOURCE: &[&str] = &["pattern", "name"];

/// Checks the `resources` section at `path`.
pub(super) fn check(value: &Value, path: &str, out: &mut Findings) {
    let Some(map) = walk::mapping(value, path, out) else {
        return;
    };
    for field in walk::fields(map, path, RESOURCES, Keys::AnyCase, out) {
        let list = match walk::untagged(field.value) {
            Value::Null => continue,
            Value::Sequence(list) => list,
            other => {
                out.error(
                    &field.path,
                    format!(
                        "expected a list of {{pattern, name}}, found {}",
                        walk::kind(other)
                    ),
                );
                continue;
            }
        };
        for (index, entry) in list.iter().enumerate() {
            check_entry(entry, &walk::item(&field.path, index), out);
        }
        if !list.is_empty() {
            out.warn(
                &field.path,
                "customising resources is not supported yet: the device plugin ignores this \
                 list and keeps its own resource names; remove it",
            );
        }
    }
}

fn check_entry(value: &Value, path: &str, out: &mut Findings) {
    let Some(map) = walk::entry(value, path, "a mapping with pattern and name", out) else {
        return;
    };
    let fields = walk::fields(map, path, RESOURCE, Keys::Exact, out);
    for required in RESOURCE {
        if !fields.iter().any(|field| field.name == *required) {
            out.error(
                &walk::child(path, required),
                format!("resources must have a '{required}' field set"),
            );
        }
    }
    for field in &fields {
        let text = walk::strict_text(field.value, &field.path, out);
        if let Some(raw) = text.filter(|_| field.name == "name")
            && let Err(error) = names::normalise(&raw)
        {
            out.error(&field.path, error);
        }
    }
}
