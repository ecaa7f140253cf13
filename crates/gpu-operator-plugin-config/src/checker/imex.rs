//! The `imex` section of a device plugin configuration: the IMEX channels to inject
//! (`channelIDs`, which the plugin accepts only as `[]` or `[0]`) and whether they are
//! `required`.

use serde_yaml::Value;

use super::Findings;
use super::walk::{self, Keys};

const IMEX: &[&str] = &["channelIDs", "required"];

/// Checks the `imex` section at `path`.
pub(super) fn check(value: &Value, path: &str, out: &mut Findings) {
    let Some(map) = walk::mapping(value, path, out) else {
        return;
    };
    for field in walk::fields(map, path, IMEX, Keys::AnyCase, out) {
        if field.name == "required" {
            walk::boolean(field.value, &field.path, out);
            continue;
        }
        let ids = match walk::untagged(field.value) {
            Value::Null => continue,
            Value::Sequence(ids) => ids,
            other => {
                out.error(
                    &field.path,
                    format!(
                        "expected a list of channel IDs such as [0], found {}",
                        walk::kind(other)
                    ),
                );
                continue;
            }
        };
        let ids: Vec<Option<i64>> = ids
            .iter()
            .enumerate()
            .map(|(index, id)| walk::integer(id, &walk::item(&field.path, index), out))
            .collect();
        if let Some(ids) = ids.into_iter().collect::<Option<Vec<_>>>()
            && !(ids.is_empty() || ids == [0])
        {
            out.error(
                &field.path,
                format!("invalid IMEX config: channelIDs must be [] or [0], found {ids:?}"),
            );
        }
    }
}
