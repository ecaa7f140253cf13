//! The `devices` field of a shared resource: the string `all`, a count greater than zero, or a
//! list of device references (GPU indexes as numbers or strings, MIG indexes `N:M`, GPU and
//! MIG UUIDs). Anything else makes the plugin refuse the whole file.

use serde_yaml::Value;

use super::Findings;
use super::names;
use super::walk;

/// Which devices of a resource are shared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Devices {
    /// `all`, the default.
    All,
    /// A count or a list: a selection, which the plugin does not support yet.
    Some,
}

const FORMS: &str = "use \"all\", a count greater than 0, or a list of devices";
const REFS: &str = "use a GPU index (0), a MIG index (0:1), GPU-<uuid>, MIG-<uuid> or \
                    MIG-GPU-<uuid>/<gi>/<ci>";

/// Checks `devices` at `path`; `None` when it is refused.
pub(super) fn check(value: &Value, path: &str, out: &mut Findings) -> Option<Devices> {
    match walk::untagged(value) {
        Value::String(text) if text == "all" => Some(Devices::All),
        Value::String(text) => {
            out.error(
                path,
                format!(
                    "devices set as \"{text}\", but the only string allowed is \"all\": \
                     {FORMS}"
                ),
            );
            None
        }
        Value::Null => {
            out.error(path, format!("devices is empty: {FORMS}"));
            None
        }
        number @ Value::Number(_) => match walk::as_whole(number) {
            Some(count) if count > 0 => Some(Devices::Some),
            Some(count) => {
                out.error(
                    path,
                    format!("devices set as {count}, but a count of devices must be > 0"),
                );
                None
            }
            None => {
                out.error(path, unrecognised(number));
                None
            }
        },
        Value::Sequence(items) => {
            let mut valid = true;
            for (index, item) in items.iter().enumerate() {
                if !is_device(item) {
                    valid = false;
                    out.error(
                        &walk::item(path, index),
                        format!(
                            "unsupported device {} in the devices list: {REFS}",
                            walk::shown(item)
                        ),
                    );
                }
            }
            valid.then_some(Devices::Some)
        }
        other => {
            out.error(path, unrecognised(other));
            None
        }
    }
}

fn unrecognised(value: &Value) -> String {
    format!(
        "unrecognised type for devices: {} ({}); {FORMS}",
        walk::kind(value),
        walk::shown(value)
    )
}

/// Whether a list item names a device: a GPU index as a number, or a device reference string.
fn is_device(item: &Value) -> bool {
    match walk::untagged(item) {
        number @ Value::Number(_) => walk::as_whole(number).is_some_and(|index| index >= 0),
        Value::String(text) => names::is_device_ref(text),
        _ => false,
    }
}
