//! Reading a YAML value the way the device plugin's loader reads it (sigs.k8s.io/yaml turns the
//! YAML into JSON, then Go's `encoding/json` fills the structs): which keys a section knows, how
//! strictly it matches their spelling, and what each scalar type accepts. Unknown keys become
//! warnings with a hint where the key belongs.

use std::sync::LazyLock;

use serde_yaml::{Mapping, Value};

use super::Findings;

/// How a section matches its keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Keys {
    /// A plain Go struct: the exact spelling, else any capitalisation (Go's `encoding/json`).
    AnyCase,
    /// A section the plugin decodes itself by looking keys up: the exact spelling only.
    Exact,
}

/// A known key of a section, as written in the file.
pub(super) struct Field<'v> {
    /// The key's canonical spelling.
    pub name: &'static str,
    /// Its field path, with the key as written.
    pub path: String,
    /// Its value.
    pub value: &'v Value,
}

/// A string setting and where it was set, for checks that span sections.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Setting {
    /// The field path.
    pub path: String,
    /// The value as the plugin reads it.
    pub value: String,
}

/// Where each known key belongs, for the hint on an unknown one.
const HOMES: &[(&str, &str)] = &[
    ("migStrategy", "flags"),
    ("failOnInitError", "flags"),
    ("mpsRoot", "flags"),
    ("nvidiaDriverRoot", "flags"),
    ("nvidiaDevRoot", "flags"),
    ("gdrcopyEnabled", "flags"),
    ("gdsEnabled", "flags"),
    ("mofedEnabled", "flags"),
    ("useNodeFeatureAPI", "flags"),
    ("deviceDiscoveryStrategy", "flags"),
    ("plugin", "flags"),
    ("gfd", "flags"),
    ("passDeviceSpecs", "flags.plugin"),
    ("deviceListStrategy", "flags.plugin"),
    ("deviceIDStrategy", "flags.plugin"),
    ("cdiAnnotationPrefix", "flags.plugin"),
    ("nvidiaCTKPath", "flags.plugin"),
    ("containerDriverRoot", "flags.plugin"),
    ("sharedDevicesAllocationPolicy", "flags.plugin"),
    ("oneshot", "flags.gfd"),
    ("noTimestamp", "flags.gfd"),
    ("sleepInterval", "flags.gfd"),
    ("outputFile", "flags.gfd"),
    ("machineTypeFile", "flags.gfd"),
    ("timeSlicing", "sharing"),
    ("mps", "sharing"),
    ("renameByDefault", "sharing.timeSlicing or sharing.mps"),
    (
        "failRequestsGreaterThanOne",
        "sharing.timeSlicing or sharing.mps",
    ),
    (
        "replicas",
        "an entry of sharing.timeSlicing.resources or sharing.mps.resources",
    ),
    (
        "rename",
        "an entry of sharing.timeSlicing.resources or sharing.mps.resources",
    ),
    (
        "devices",
        "an entry of sharing.timeSlicing.resources or sharing.mps.resources",
    ),
    ("channelIDs", "imex"),
    ("required", "imex"),
    ("gpus", "resources"),
];

/// The path of `key` inside `path`.
pub(super) fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// The path of item `index` of the list at `path`.
pub(super) fn item(path: &str, index: usize) -> String {
    format!("{path}[{index}]")
}

/// `value` without its YAML tag, if any.
pub(super) fn untagged(value: &Value) -> &Value {
    match value {
        Value::Tagged(tagged) => untagged(&tagged.value),
        other => other,
    }
}

/// What kind of value `value` is, for messages.
pub(super) fn kind(value: &Value) -> &'static str {
    match untagged(value) {
        Value::Null => "nothing (null)",
        Value::Bool(_) => "true/false",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Sequence(_) => "a list",
        Value::Mapping(_) | Value::Tagged(_) => "a mapping",
    }
}

/// `value` shown in a message.
pub(super) fn shown(value: &Value) -> String {
    match untagged(value) {
        Value::String(s) => format!("\"{s}\""),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        other => kind(other).to_owned(),
    }
}

/// The mapping at `path`, or `None` when it is null (the defaults) or not a mapping (an error).
pub(super) fn mapping<'v>(value: &'v Value, path: &str, out: &mut Findings) -> Option<&'v Mapping> {
    match untagged(value) {
        Value::Mapping(map) => Some(map),
        Value::Null => None,
        other => {
            out.error(
                path,
                format!(
                    "expected a mapping (key: value lines), found {}",
                    kind(other)
                ),
            );
            None
        }
    }
}

/// An entry of a list the plugin decodes itself at `path`: a mapping, where null reads as an
/// empty one; `None` (an error) for anything else, which should be `expected`.
pub(super) fn entry<'v>(
    value: &'v Value,
    path: &str,
    expected: &str,
    out: &mut Findings,
) -> Option<&'v Mapping> {
    static EMPTY: LazyLock<Mapping> = LazyLock::new(Mapping::new);
    match untagged(value) {
        Value::Mapping(map) => Some(map),
        Value::Null => Some(&EMPTY),
        other => {
            out.error(path, format!("expected {expected}, found {}", kind(other)));
            None
        }
    }
}

/// The known fields of `map` in document order. Unknown keys are warned about (the plugin
/// ignores them), keys matched only by ignoring case too.
pub(super) fn fields<'v>(
    map: &'v Mapping,
    path: &str,
    known: &[&'static str],
    keys: Keys,
    out: &mut Findings,
) -> Vec<Field<'v>> {
    let mut found = Vec::new();
    for (key, value) in map {
        let Some(key) = key_text(key, path, out) else {
            continue;
        };
        let key_path = child(path, &key);
        if let Some(name) = known.iter().find(|name| **name == key) {
            found.push(Field {
                name,
                path: key_path,
                value,
            });
        } else if let Some(name) = known.iter().find(|name| name.eq_ignore_ascii_case(&key))
            && keys == Keys::AnyCase
        {
            out.warn(
                &key_path,
                format!("the device plugin matches this key only by ignoring case: write `{name}`"),
            );
            found.push(Field {
                name,
                path: key_path,
                value,
            });
        } else {
            out.warn(&key_path, unknown_key(&key, known));
        }
    }
    found
}

/// A key as the loader reads it: numbers and booleans become text, other keys are errors.
fn key_text(key: &Value, path: &str, out: &mut Findings) -> Option<String> {
    match untagged(key) {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        other => {
            out.error(
                path,
                format!("a key must be text, found {}: remove it", kind(other)),
            );
            None
        }
    }
}

/// The warning for an unknown `key` in a section that knows `known`.
fn unknown_key(key: &str, known: &[&str]) -> String {
    let ignored = "unknown key: the device plugin ignores it";
    if let Some((name, home)) = HOMES
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(key))
    {
        return format!("{ignored}; `{name}` belongs under {home}");
    }
    match known.iter().find(|name| is_near(key, name)) {
        Some(near) => format!("{ignored}; did you mean `{near}`?"),
        None => format!("{ignored}; this section knows {}", known.join(", ")),
    }
}

/// Whether `key` looks like a misspelling of `name`: the same letters in another case, or at
/// most two edits away (one for short names).
fn is_near(key: &str, name: &str) -> bool {
    let key: Vec<char> = key.to_lowercase().chars().collect();
    let name: Vec<char> = name.to_lowercase().chars().collect();
    let allowed = if name.len() <= 4 { 1 } else { 2 };
    edit_distance(&key, &name) <= allowed
}

/// The Levenshtein distance between `a` and `b`.
fn edit_distance(a: &[char], b: &[char]) -> usize {
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let replace = previous[j] + usize::from(ca != cb);
            current.push(replace.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

/// A string field of a plain Go struct: numbers and booleans are turned into text, as the
/// loader does for string targets. `None` for null (the default).
pub(super) fn text(value: &Value, path: &str, out: &mut Findings) -> Option<String> {
    match untagged(value) {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Null => None,
        other => {
            out.error(path, format!("expected a string, found {}", kind(other)));
            None
        }
    }
}

/// A string the plugin decodes itself: no conversion from numbers or booleans. Null reads as
/// the empty string.
pub(super) fn strict_text(value: &Value, path: &str, out: &mut Findings) -> Option<String> {
    match untagged(value) {
        Value::String(s) => Some(s.clone()),
        Value::Null => Some(String::new()),
        other => {
            out.error(
                path,
                format!(
                    "expected a string, found {} ({}): put it in quotes",
                    kind(other),
                    shown(other)
                ),
            );
            None
        }
    }
}

/// YAML 1.1 spellings of booleans, which the plugin's YAML reader still takes as booleans.
const YAML11_TRUE: &[&str] = &["y", "Y", "yes", "Yes", "YES", "on", "On", "ON"];
const YAML11_FALSE: &[&str] = &["n", "N", "no", "No", "NO", "off", "Off", "OFF"];

/// A boolean field. `None` for null (the default).
pub(super) fn boolean(value: &Value, path: &str, out: &mut Findings) -> Option<bool> {
    match untagged(value) {
        Value::Bool(b) => Some(*b),
        Value::Null => None,
        Value::String(s) if YAML11_TRUE.contains(&s.as_str()) => {
            out.warn(
                path,
                format!("`{s}` is read as true by the device plugin only: write true"),
            );
            Some(true)
        }
        Value::String(s) if YAML11_FALSE.contains(&s.as_str()) => {
            out.warn(
                path,
                format!("`{s}` is read as false by the device plugin only: write false"),
            );
            Some(false)
        }
        other => {
            out.error(
                path,
                format!(
                    "expected true or false, found {} ({})",
                    kind(other),
                    shown(other)
                ),
            );
            None
        }
    }
}

/// A whole number that fits Go's `int`, if `value` is one.
pub(super) fn as_whole(value: &Value) -> Option<i64> {
    let Value::Number(n) = untagged(value) else {
        return None;
    };
    if let Some(i) = n.as_i64() {
        return Some(i);
    }
    let f = n.as_f64()?;
    #[allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)]
    let whole = (f.fract() == 0.0 && f.abs() < i64::MAX as f64).then_some(f as i64);
    whole
}

/// An integer field. `None` for null (the default).
pub(super) fn integer(value: &Value, path: &str, out: &mut Findings) -> Option<i64> {
    if untagged(value).is_null() {
        return None;
    }
    let whole = as_whole(value);
    if whole.is_none() {
        out.error(
            path,
            format!(
                "expected a whole number, found {} ({})",
                kind(value),
                shown(value)
            ),
        );
    }
    whole
}
