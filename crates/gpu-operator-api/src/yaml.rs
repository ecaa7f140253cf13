//! A small YAML writer for the manifests we generate (CRDs), safe for YAML 1.1 readers.
//!
//! serde_yaml writes YAML 1.2, where `on` and `off` are plain strings; kubectl and the API server
//! read YAML 1.1, where they are booleans (`ccManager.defaultMode` has both). This writer quotes
//! every string that is not unambiguously a string, and writes whole floats (schema minimums) as
//! integers.

use serde_json::Value;

/// Appends `value` as a YAML document to `out`.
pub fn write(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) if !map.is_empty() => write_map(map, 0, out),
        Value::Array(items) if !items.is_empty() => write_list(items, 0, out),
        scalar => {
            out.push_str(&scalar_text(scalar));
            out.push('\n');
        }
    }
}

fn write_map(map: &serde_json::Map<String, Value>, indent: usize, out: &mut String) {
    for (i, (key, value)) in map.iter().enumerate() {
        // The first key of a list item continues the `- ` line.
        if i > 0 || !out.ends_with("- ") {
            out.push_str(&" ".repeat(indent));
        }
        out.push_str(&string_text(key));
        out.push(':');
        write_value_after_key(value, indent, out);
    }
}

fn write_value_after_key(value: &Value, indent: usize, out: &mut String) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            out.push('\n');
            write_map(map, indent + 2, out);
        }
        Value::Array(items) if !items.is_empty() => {
            out.push('\n');
            write_list(items, indent + 2, out);
        }
        scalar => {
            out.push(' ');
            out.push_str(&scalar_text(scalar));
            out.push('\n');
        }
    }
}

fn write_list(items: &[Value], indent: usize, out: &mut String) {
    for item in items {
        out.push_str(&" ".repeat(indent));
        out.push_str("- ");
        match item {
            Value::Object(map) if !map.is_empty() => write_map(map, indent + 2, out),
            Value::Array(inner) if !inner.is_empty() => {
                out.push('\n');
                write_list(inner, indent + 2, out);
            }
            scalar => {
                out.push_str(&scalar_text(scalar));
                out.push('\n');
            }
        }
    }
}

fn scalar_text(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => number_text(n),
        Value::String(s) => string_text(s),
        Value::Array(_) => "[]".into(),
        Value::Object(_) => "{}".into(),
    }
}

fn number_text(n: &serde_json::Number) -> String {
    if n.is_f64()
        && let Some(f) = n.as_f64()
        && f.fract() == 0.0
        && f.abs() < 9.0e15
    {
        #[allow(clippy::cast_possible_truncation)]
        return (f as i64).to_string();
    }
    n.to_string()
}

/// A string as a plain scalar when that cannot be read as anything else, else double-quoted
/// (JSON's escaping is valid YAML).
fn string_text(s: &str) -> String {
    const AMBIGUOUS: [&str; 11] = [
        "y", "n", "yes", "no", "on", "off", "true", "false", "null", "~", "<<",
    ];
    let plain = s
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '/')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./-".contains(c))
        && !AMBIGUOUS.contains(&s.to_ascii_lowercase().as_str());
    if plain {
        s.to_owned()
    } else {
        Value::String(s.to_owned()).to_string()
    }
}
