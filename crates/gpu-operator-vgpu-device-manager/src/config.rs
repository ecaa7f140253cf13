//! Reading a vGPU device configuration file (`version: v1`, `vgpu-configs: {<name>: [entries]}`,
//! each entry `devices` (`all` or GPU indexes), an optional `device-filter` (PCI device IDs) and
//! `vgpu-devices` (vGPU type to count)) by the vGPU device manager's parser rules, each vGPU type
//! checked against the type grammar and, for a GPU model this operator knows, against its types.
//! Every problem is named by its field path (`vgpu-configs.<name>[<entry>].<field>`). Pure.

use std::fmt::Write as _;

use serde_yaml::{Mapping, Value};

use crate::{catalog, vgpu_type};

/// At most this many problems are listed; the rest are counted.
const MAX_PROBLEMS: usize = 10;
/// At most this many types of a known GPU model are listed.
const MAX_TYPES_LISTED: usize = 24;

/// The configuration names of `text`, or its problems, each naming its field.
pub fn configs(text: &str) -> Result<Vec<String>, String> {
    let document: Value = serde_yaml::from_str(text).map_err(|e| format!("not YAML: {e}"))?;
    let Value::Mapping(top) = document else {
        return Err(
            "not a vGPU device configuration: expected a mapping with version and \
                    vgpu-configs"
                .to_owned(),
        );
    };
    let mut problems = Vec::new();
    for key in top.keys() {
        match key.as_str() {
            Some("version" | "vgpu-configs") => {}
            _ => problems.push(format!(
                "unexpected field {} (a vGPU device configuration has version and vgpu-configs \
                 only)",
                show(key)
            )),
        }
    }
    match top.get("version") {
        Some(Value::String(v)) if v == "v1" => {}
        Some(other) => problems.push(format!(
            "version: {} is not v1, the only version the vGPU device manager reads",
            show(other)
        )),
        None => problems.push("version: missing, set it to v1".to_owned()),
    }
    let mut names = Vec::new();
    match top.get("vgpu-configs") {
        Some(Value::Mapping(configs)) if !configs.is_empty() => {
            for (name, entries) in configs {
                let Some(name) = name.as_str() else {
                    problems.push(format!(
                        "vgpu-configs: configuration name {} is not a string",
                        show(name)
                    ));
                    continue;
                };
                check_config(name, entries, &mut problems);
                names.push(name.to_owned());
            }
        }
        _ => problems
            .push("vgpu-configs: missing or empty, name at least one configuration".to_owned()),
    }
    if problems.is_empty() {
        Ok(names)
    } else {
        Err(join(&problems))
    }
}

/// The problems joined, the first [`MAX_PROBLEMS`] listed.
fn join(problems: &[String]) -> String {
    let mut text = problems
        .iter()
        .take(MAX_PROBLEMS)
        .cloned()
        .collect::<Vec<_>>()
        .join("; ");
    if problems.len() > MAX_PROBLEMS {
        let _ = write!(text, "; and {} more", problems.len() - MAX_PROBLEMS);
    }
    text
}

/// A value as it reads in YAML, for messages.
fn show(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{s:?}"),
        other => serde_yaml::to_string(other)
            .map(|s| s.trim_end().to_owned())
            .unwrap_or_default(),
    }
}

fn check_config(name: &str, entries: &Value, problems: &mut Vec<String>) {
    let path = format!("vgpu-configs.{name}");
    match entries {
        Value::Sequence(entries) if !entries.is_empty() => {
            for (i, entry) in entries.iter().enumerate() {
                check_entry(&format!("{path}[{i}]"), entry, problems);
            }
        }
        _ => problems.push(format!(
            "{path}: expected a list of entries, each with devices and vgpu-devices"
        )),
    }
}

fn check_entry(path: &str, entry: &Value, problems: &mut Vec<String>) {
    let Value::Mapping(entry) = entry else {
        problems.push(format!(
            "{path}: expected a mapping with devices and vgpu-devices"
        ));
        return;
    };
    for key in entry.keys() {
        match key.as_str() {
            Some("device-filter" | "devices" | "vgpu-devices") => {}
            _ => problems.push(format!(
                "{path}: unexpected field {} (an entry has device-filter, devices and \
                 vgpu-devices)",
                show(key)
            )),
        }
    }
    match entry.get("devices") {
        Some(Value::String(all)) if all == "all" => {}
        Some(Value::Sequence(items)) if items.iter().all(Value::is_u64) => {}
        Some(other) => problems.push(format!(
            "{path}.devices: {} is neither all nor a list of GPU indexes",
            show(other)
        )),
        None => problems.push(format!("{path}: missing devices (all or GPU indexes)")),
    }
    if let Some(filter) = entry.get("device-filter") {
        check_filter(&format!("{path}.device-filter"), filter, problems);
    }
    match entry.get("vgpu-devices") {
        Some(Value::Mapping(devices)) => {
            check_devices(&format!("{path}.vgpu-devices"), devices, problems);
        }
        Some(other) => problems.push(format!(
            "{path}.vgpu-devices: {} is not a map of vGPU type to count",
            show(other)
        )),
        None => problems.push(format!(
            "{path}: missing vgpu-devices (a map of vGPU type to count)"
        )),
    }
}

/// A device filter is one PCI device ID or a list of them: `0x<device><vendor>`, optionally
/// `:0x<subsystem device><subsystem vendor>` (decimal also reads).
fn check_filter(path: &str, filter: &Value, problems: &mut Vec<String>) {
    let ids: Vec<&Value> = match filter {
        Value::Sequence(items) => items.iter().collect(),
        one => vec![one],
    };
    for id in ids {
        let ok = id
            .as_str()
            .is_some_and(|s| s.split(':').count() <= 2 && s.split(':').all(device_id));
        if !ok {
            problems.push(format!(
                "{path}: {} is not a PCI device ID such as 0x20B510DE (device 20B5, vendor 10DE)",
                show(id)
            ));
        }
    }
}

/// A 32-bit number, hexadecimal with `0x` or decimal.
fn device_id(text: &str) -> bool {
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16).is_ok() && !hex.starts_with('+'),
        None => text.parse::<u32>().is_ok() && !text.starts_with('+'),
    }
}

fn check_devices(path: &str, devices: &Mapping, problems: &mut Vec<String>) {
    let mut kinds: Vec<(String, bool)> = Vec::new();
    for (name, count) in devices {
        let Some(name) = name.as_str() else {
            problems.push(format!("{path}: vGPU type {} is not a string", show(name)));
            continue;
        };
        let field = format!("{path}.{name}");
        if !count
            .as_u64()
            .is_some_and(|c| c > 0 && u32::try_from(c).is_ok())
        {
            problems.push(format!(
                "{field}: count {} is not a positive whole number",
                show(count)
            ));
        }
        let Some(parsed) = vgpu_type::parse(name) else {
            problems.push(format!("{field}: not a vGPU type: {}", vgpu_type::SHAPE));
            continue;
        };
        if let Some(known) = catalog::types_of(parsed.gpu)
            && !known.iter().any(|(t, _)| t == name)
        {
            problems.push(format!(
                "{field}: not a vGPU type of the {} (its types: {})",
                parsed.gpu,
                listed(known)
            ));
        }
        kinds.push((name.to_owned(), parsed.mig_backed()));
    }
    let time_sliced = kinds.iter().find(|(_, mig)| !mig);
    let mig_backed = kinds.iter().find(|(_, mig)| *mig);
    if let (Some((sliced, _)), Some((mig, _))) = (time_sliced, mig_backed) {
        problems.push(format!(
            "{path}: mixes time-sliced {sliced} and MIG-backed {mig}, which one GPU cannot hold \
             together: split them into entries for different devices"
        ));
    }
}

/// The names of `types`, the first [`MAX_TYPES_LISTED`] listed.
fn listed(types: &[(String, u32)]) -> String {
    let mut text = types
        .iter()
        .take(MAX_TYPES_LISTED)
        .map(|(name, _)| name.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    if types.len() > MAX_TYPES_LISTED {
        let _ = write!(text, " and {} more", types.len() - MAX_TYPES_LISTED);
    }
    text
}

#[cfg(test)]
mod tests;
