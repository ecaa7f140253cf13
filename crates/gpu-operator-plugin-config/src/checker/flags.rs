//! The `flags` section of a device plugin configuration: the options shared by the plugin and
//! GPU Feature Discovery, `flags.plugin` and `flags.gfd`. Checks the types the loader accepts
//! and the values the plugin refuses at startup.

use serde_yaml::Value;

use super::Findings;
use super::duration::{self, Duration};
use super::walk::{self, Keys, Setting};

const FLAGS: &[&str] = &[
    "migStrategy",
    "failOnInitError",
    "mpsRoot",
    "nvidiaDriverRoot",
    "nvidiaDevRoot",
    "gdrcopyEnabled",
    "gdsEnabled",
    "mofedEnabled",
    "useNodeFeatureAPI",
    "deviceDiscoveryStrategy",
    "plugin",
    "gfd",
];
const PLUGIN: &[&str] = &[
    "passDeviceSpecs",
    "deviceListStrategy",
    "deviceIDStrategy",
    "cdiAnnotationPrefix",
    "nvidiaCTKPath",
    "containerDriverRoot",
    "sharedDevicesAllocationPolicy",
];
const GFD: &[&str] = &[
    "oneshot",
    "noTimestamp",
    "sleepInterval",
    "outputFile",
    "machineTypeFile",
];

const MIG_STRATEGIES: &[&str] = &["none", "single", "mixed"];
const DISCOVERY_STRATEGIES: &[&str] = &["auto", "nvml", "tegra"];
const DEVICE_LIST_STRATEGIES: &[&str] = &["envvar", "volume-mounts", "cdi-annotations", "cdi-cri"];
const DEVICE_ID_STRATEGIES: &[&str] = &["uuid", "index"];
const ALLOCATION_POLICIES: &[&str] = &["distributed", "packed"];

/// A GFD sleep interval below this, given as a bare number of nanoseconds, was surely meant in
/// seconds.
const ONE_SECOND_NANOS: i64 = 1_000_000_000;

/// The flags that checks of other sections need.
#[derive(Debug, Default)]
pub(super) struct Facts {
    /// `flags.migStrategy`, when set.
    pub mig_strategy: Option<Setting>,
    /// `flags.mpsRoot`, when set.
    pub mps_root: Option<Setting>,
}

/// Checks the `flags` section at `path`.
pub(super) fn check(value: &Value, path: &str, out: &mut Findings) -> Facts {
    let mut facts = Facts::default();
    let Some(map) = walk::mapping(value, path, out) else {
        return facts;
    };
    for field in walk::fields(map, path, FLAGS, Keys::AnyCase, out) {
        let (value, path) = (field.value, field.path.as_str());
        match field.name {
            "migStrategy" => {
                facts.mig_strategy = walk::text(value, path, out).map(|value| {
                    one_of(&value, MIG_STRATEGIES, "unknown MIG strategy", path, out);
                    Setting {
                        path: path.to_owned(),
                        value,
                    }
                });
            }
            "mpsRoot" => {
                facts.mps_root = walk::text(value, path, out).map(|value| Setting {
                    path: path.to_owned(),
                    value,
                });
            }
            "deviceDiscoveryStrategy" => {
                if let Some(strategy) = walk::text(value, path, out) {
                    let what = "invalid device discovery strategy";
                    one_of(&strategy, DISCOVERY_STRATEGIES, what, path, out);
                }
            }
            "nvidiaDriverRoot" | "nvidiaDevRoot" => {
                walk::text(value, path, out);
            }
            "plugin" => check_plugin(value, path, out),
            "gfd" => check_gfd(value, path, out),
            _ => {
                walk::boolean(value, path, out);
            }
        }
    }
    facts
}

fn check_plugin(value: &Value, path: &str, out: &mut Findings) {
    let Some(map) = walk::mapping(value, path, out) else {
        return;
    };
    for field in walk::fields(map, path, PLUGIN, Keys::AnyCase, out) {
        let (value, path) = (field.value, field.path.as_str());
        let (allowed, what): (&[&str], _) = match field.name {
            "passDeviceSpecs" => {
                walk::boolean(value, path, out);
                continue;
            }
            "deviceListStrategy" => {
                check_device_list_strategy(value, path, out);
                continue;
            }
            "deviceIDStrategy" => (DEVICE_ID_STRATEGIES, "invalid device ID strategy"),
            "sharedDevicesAllocationPolicy" => (
                ALLOCATION_POLICIES,
                "invalid shared devices allocation policy",
            ),
            _ => {
                walk::text(value, path, out);
                continue;
            }
        };
        if let Some(setting) = walk::text(value, path, out) {
            one_of(&setting, allowed, what, path, out);
        }
    }
}

/// `deviceListStrategy` is one strategy or a list of them, strings only (the plugin decodes it
/// itself, so numbers are not turned into text).
fn check_device_list_strategy(value: &Value, path: &str, out: &mut Findings) {
    let what = "invalid device list strategy";
    match walk::untagged(value) {
        Value::Null => {}
        Value::String(strategy) => one_of(strategy, DEVICE_LIST_STRATEGIES, what, path, out),
        Value::Sequence(strategies) if strategies.is_empty() => out.warn(
            path,
            "an empty list selects no way to hand devices to containers: leave the key out for \
             the default envvar, or name at least one strategy",
        ),
        Value::Sequence(strategies) => {
            for (index, strategy) in strategies.iter().enumerate() {
                let path = walk::item(path, index);
                if let Value::String(strategy) = walk::untagged(strategy) {
                    one_of(strategy, DEVICE_LIST_STRATEGIES, what, &path, out);
                } else {
                    out.error(
                        &path,
                        format!(
                            "{what} {}: expected one of {}",
                            walk::shown(strategy),
                            listed(DEVICE_LIST_STRATEGIES)
                        ),
                    );
                }
            }
        }
        other => out.error(
            path,
            format!(
                "{what}: expected a strategy or a list of strategies, found {} ({})",
                walk::kind(other),
                walk::shown(other)
            ),
        ),
    }
}

fn check_gfd(value: &Value, path: &str, out: &mut Findings) {
    let Some(map) = walk::mapping(value, path, out) else {
        return;
    };
    for field in walk::fields(map, path, GFD, Keys::AnyCase, out) {
        let (value, path) = (field.value, field.path.as_str());
        match field.name {
            "oneshot" | "noTimestamp" => {
                walk::boolean(value, path, out);
            }
            "sleepInterval" => check_sleep_interval(value, path, out),
            _ => {
                walk::text(value, path, out);
            }
        }
    }
}

/// `sleepInterval`: a Go duration, a number of nanoseconds, or "infinite".
fn check_sleep_interval(value: &Value, path: &str, out: &mut Findings) {
    let interval = match walk::untagged(value) {
        Value::Null => return,
        Value::String(text) => match duration::parse_interval(text) {
            Ok(interval) => interval,
            Err(error) => {
                out.error(path, error);
                return;
            }
        },
        Value::Number(number) => {
            let nanos = walk::as_whole(value).unwrap_or_else(|| {
                #[allow(clippy::cast_possible_truncation)]
                let truncated = number.as_f64().unwrap_or_default() as i64;
                truncated
            });
            if nanos > 0 && nanos < ONE_SECOND_NANOS {
                out.warn(
                    path,
                    format!(
                        "a bare number is nanoseconds: {number} is {nanos}ns, so GFD would \
                         relabel almost continuously; write a duration such as \"{number}s\""
                    ),
                );
                return;
            }
            Duration::Finite(nanos)
        }
        other => {
            out.error(
                path,
                format!(
                    "invalid duration: expected a duration such as \"60s\", a number of \
                     nanoseconds or \"infinite\", found {}",
                    walk::kind(other)
                ),
            );
            return;
        }
    };
    if let Duration::Finite(nanos) = interval
        && nanos <= 0
    {
        out.warn(
            path,
            "a sleep interval of zero or less makes GFD relabel continuously: give a positive \
             duration such as \"60s\", or \"infinite\" to label once",
        );
    }
}

/// Reports `value` at `path` when it is not one of `allowed`, as "`what` `value`: ...".
fn one_of(value: &str, allowed: &[&str], what: &str, path: &str, out: &mut Findings) {
    if !allowed.contains(&value) {
        out.error(path, format!("{what} `{value}`: use {}", listed(allowed)));
    }
}

/// "a, b or c".
fn listed(items: &[&str]) -> String {
    match items.split_last() {
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}
