//! Reading a mig-parted configuration (`version: v1`, `mig-configs: {<layout>: [entries]}`) by
//! mig-parted's parser rules, to learn which layouts it defines. Pure.

use std::collections::BTreeSet;

use serde_yaml::Value;

/// Why a document is not a mig-parted configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a mig-parted configuration: {0}")]
pub struct ConfigError(String);

fn fail<T>(message: impl Into<String>) -> Result<T, ConfigError> {
    Err(ConfigError(message.into()))
}

/// The layout names of a mig-parted configuration, or what is wrong with it.
pub fn layouts(yaml: &str) -> Result<BTreeSet<String>, ConfigError> {
    let document: Value =
        serde_yaml::from_str(yaml).map_err(|e| ConfigError(format!("invalid YAML: {e}")))?;
    let Value::Mapping(top) = document else {
        return fail("the document must be a mapping");
    };
    for key in top.keys() {
        match key.as_str() {
            Some("version" | "mig-configs") => {}
            other => return fail(format!("unexpected field {other:?}")),
        }
    }
    match top.get("version").and_then(Value::as_str) {
        Some("v1") => {}
        Some(other) => return fail(format!("unknown version {other:?}")),
        None => return fail("missing 'version' field"),
    }
    let Some(Value::Mapping(configs)) = top.get("mig-configs") else {
        return fail("missing 'mig-configs' mapping");
    };
    if configs.is_empty() {
        return fail("mig-configs needs at least one entry");
    }
    let mut names = BTreeSet::new();
    for (name, entries) in configs {
        let name = name.as_str().unwrap_or_default().to_owned();
        let Value::Sequence(entries) = entries else {
            return fail(format!("{name}: must be a list of entries"));
        };
        if entries.is_empty() {
            return fail(format!("{name}: needs at least one entry"));
        }
        for entry in entries {
            check_entry(entry).map_err(|e| ConfigError(format!("{name}: {}", e.0)))?;
        }
        names.insert(name);
    }
    Ok(names)
}

fn check_entry(entry: &Value) -> Result<(), ConfigError> {
    let Value::Mapping(entry) = entry else {
        return fail("an entry must be a mapping");
    };
    for key in entry.keys() {
        match key.as_str() {
            Some("device-filter" | "devices" | "mig-enabled" | "mig-devices") => {}
            other => return fail(format!("unexpected field {other:?}")),
        }
    }
    match entry.get("devices") {
        Some(Value::String(all)) if all == "all" => {}
        Some(Value::Sequence(items)) if items.iter().all(Value::is_u64) => {}
        Some(_) => return fail("devices must be \"all\" or a list of GPU indexes"),
        None => return fail("missing required field 'devices'"),
    }
    let Some(enabled) = entry.get("mig-enabled").and_then(Value::as_bool) else {
        return fail("missing required field 'mig-enabled'");
    };
    match (enabled, entry.get("mig-devices")) {
        (true, None) => fail("missing required field 'mig-devices'"),
        (false, Some(Value::Mapping(devices))) if !devices.is_empty() => {
            fail("MIG devices included while MIG is disabled")
        }
        (_, Some(Value::Mapping(devices))) => check_devices(devices),
        (_, Some(_)) => fail("mig-devices must be a mapping of profile to count"),
        (false, None) => Ok(()),
    }
}

fn check_devices(devices: &serde_yaml::Mapping) -> Result<(), ConfigError> {
    let mut total = 0;
    for (profile, count) in devices {
        let profile = profile.as_str().unwrap_or_default();
        check_profile(profile)?;
        let Some(count) = count.as_u64() else {
            return fail(format!("{profile}: invalid count"));
        };
        total += count;
    }
    if !devices.is_empty() && total == 0 {
        return fail("all MIG device counts are 0");
    }
    Ok(())
}

/// `<G>g.<M>gb` or `<C>c.<G>g.<M>gb`, optionally with `+attr,…` or `-attr,…`.
fn check_profile(profile: &str) -> Result<(), ConfigError> {
    let (base, attributes) = match (profile.find('+'), profile.find('-')) {
        (Some(_), Some(_)) => return fail(format!("{profile}: contains both + and -")),
        (Some(at), None) | (None, Some(at)) => (&profile[..at], Some(&profile[at + 1..])),
        (None, None) => (profile, None),
    };
    let fields: Vec<&str> = base.split('.').collect();
    let shape_ok = match fields.as_slice() {
        [g, m] => unit(g, "g") && unit(m, "gb"),
        [c, g, m] => unit(c, "c") && unit(g, "g") && unit(m, "gb"),
        _ => false,
    };
    if !shape_ok {
        return fail(format!("{profile}: wrong number of fields"));
    }
    for attribute in attributes.map(|a| a.split(',')).into_iter().flatten() {
        let valid = !attribute.is_empty()
            && !attribute.starts_with(|c: char| c.is_ascii_digit() || c == '.')
            && !attribute.ends_with('.')
            && attribute
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.');
        if !valid {
            return fail(format!("{profile}: invalid attribute {attribute:?}"));
        }
    }
    Ok(())
}

fn unit(field: &str, suffix: &str) -> bool {
    field
        .strip_suffix(suffix)
        .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_configs_name_their_layouts() {
        let yaml = "version: v1\nmig-configs:\n  all-disabled:\n    - devices: all\n      mig-enabled: false\n  custom:\n    - device-filter: [\"0x233010DE\"]\n      devices: [0, 1]\n      mig-enabled: true\n      mig-devices: {\"1g.10gb+me\": 1, \"1c.2g.10gb\": 6}\n";
        let names: Vec<String> = layouts(yaml).unwrap().into_iter().collect();
        assert_eq!(names, ["all-disabled", "custom"]);
    }

    #[test]
    fn mig_parted_rejects_what_we_reject() {
        let entry = |body: &str| format!("version: v1\nmig-configs:\n  x:\n    - {body}\n");
        let cases = [
            (
                "mig-configs: {x: [{devices: all, mig-enabled: false}]}".to_owned(),
                "version",
            ),
            ("version: v2\nmig-configs: {}".to_owned(), "unknown version"),
            ("version: v1\nmig-config: {}".to_owned(), "unexpected field"),
            ("version: v1\nmig-configs: {}".to_owned(), "at least one"),
            (
                "version: v1\nmig-configs: {x: []}".to_owned(),
                "at least one",
            ),
            (entry("mig-enabled: false"), "devices"),
            (
                entry("devices: first\n      mig-enabled: false"),
                "devices must be",
            ),
            (
                entry("devices: all\n      mig-enabled: true"),
                "mig-devices",
            ),
            (
                entry("devices: all\n      mig-enabled: false\n      mig-devices: {1g.10gb: 1}"),
                "while MIG is disabled",
            ),
            (
                entry("devices: all\n      mig-enabled: true\n      mig-devcies: {}"),
                "unexpected field",
            ),
            (
                entry("devices: all\n      mig-enabled: true\n      mig-devices: {1g10gb: 1}"),
                "fields",
            ),
            (
                entry("devices: all\n      mig-enabled: true\n      mig-devices: {1g.10gb+: 1}"),
                "attribute",
            ),
            (
                entry(
                    "devices: all\n      mig-enabled: true\n      mig-devices: {1g.10gb+me-x: 1}",
                ),
                "both",
            ),
            (
                entry("devices: all\n      mig-enabled: true\n      mig-devices: {1g.10gb+2x: 1}"),
                "attribute",
            ),
            (
                entry("devices: all\n      mig-enabled: true\n      mig-devices: {1g.10gb: -1}"),
                "count",
            ),
            (
                entry(
                    "devices: all\n      mig-enabled: true\n      mig-devices: {1g.10gb: 0, 2g.20gb: 0}",
                ),
                "are 0",
            ),
        ];
        for (yaml, expected) in cases {
            let error = layouts(&yaml).unwrap_err().to_string();
            assert!(error.contains(expected), "{yaml}\n=> {error}");
        }
    }
}
