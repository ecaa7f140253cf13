//! The `sharing` section of a device plugin configuration: `timeSlicing` and `mps`, each a list
//! of resources to replicate. Checks what the plugin refuses while reading them (no resources,
//! no name, fewer than two replicas, a bad name or `devices`) and warns about what it quietly
//! ignores (a rename or device selection it strips, a name it does not advertise, both
//! strategies at once, where MPS wins).

use serde_yaml::Value;

use super::Findings;
use super::devices::{self, Devices};
use super::names;
use super::walk::{self, Keys};

const SHARING: &[&str] = &["timeSlicing", "mps"];
const REPLICATED: &[&str] = &["renameByDefault", "failRequestsGreaterThanOne", "resources"];
const RESOURCE: &[&str] = &["name", "rename", "devices", "replicas"];

/// The suffix of a shared resource renamed by default.
const SHARED_SUFFIX: &str = ".shared";
/// The fewest replicas a shared resource may have.
const MIN_REPLICAS: i64 = 2;

/// The two sharing strategies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Strategy {
    TimeSlicing,
    Mps,
}

/// Checks the `sharing` section at `path`. Returns the path of `sharing.mps` when MPS sharing
/// is configured, for the startup checks that depend on it.
pub(super) fn check(value: &Value, path: &str, out: &mut Findings) -> Option<String> {
    let map = walk::mapping(value, path, out)?;
    let (mut time_slicing, mut mps) = (None, None);
    for field in walk::fields(map, path, SHARING, Keys::AnyCase, out) {
        let null = walk::untagged(field.value).is_null();
        match field.name {
            // The plugin decodes an empty timeSlicing as one without resources, but an empty
            // mps as no MPS.
            "timeSlicing" if null => out.error(&field.path, no_resources(&field.path)),
            "timeSlicing" => {
                check_replicated(field.value, &field.path, Strategy::TimeSlicing, out);
                time_slicing = Some(field.path);
            }
            _ if null => mps = None,
            _ => {
                check_replicated(field.value, &field.path, Strategy::Mps, out);
                mps = Some(field.path);
            }
        }
    }
    if let (Some(time_slicing), Some(mps)) = (&time_slicing, &mps) {
        out.warn(
            path,
            format!(
                "both {time_slicing} and {mps} are set: the device plugin uses MPS and ignores \
                 time-slicing; keep one of them"
            ),
        );
    }
    mps
}

fn no_resources(path: &str) -> String {
    format!(
        "no resources specified: add `resources: [{{name: nvidia.com/gpu, replicas: 2}}]` to \
         {path} or remove it"
    )
}

/// Checks one strategy (`timeSlicing` or `mps`) at `path`.
fn check_replicated(value: &Value, path: &str, strategy: Strategy, out: &mut Findings) {
    let Value::Mapping(map) = walk::untagged(value) else {
        out.error(
            path,
            format!(
                "expected a mapping with `resources`, found {}",
                walk::kind(value)
            ),
        );
        return;
    };
    let fields = walk::fields(map, path, REPLICATED, Keys::Exact, out);
    let mut rename_by_default = false;
    let mut resources = None;
    for field in &fields {
        match field.name {
            "renameByDefault" => {
                rename_by_default = walk::boolean(field.value, &field.path, out).unwrap_or(false);
            }
            "failRequestsGreaterThanOne" => {
                walk::boolean(field.value, &field.path, out);
            }
            _ => resources = Some(field),
        }
    }
    let Some(resources) = resources else {
        out.error(path, no_resources(path));
        return;
    };
    let list = match walk::untagged(resources.value) {
        Value::Sequence(list) if !list.is_empty() => list,
        Value::Sequence(_) | Value::Null => {
            out.error(&resources.path, no_resources(path));
            return;
        }
        other => {
            out.error(
                &resources.path,
                format!(
                    "expected a list of resources to share, found {}",
                    walk::kind(other)
                ),
            );
            return;
        }
    };
    let mut seen: Vec<String> = Vec::new();
    for (index, entry) in list.iter().enumerate() {
        let entry_path = walk::item(&resources.path, index);
        let Some(name) = check_resource(entry, &entry_path, rename_by_default, strategy, out)
        else {
            continue;
        };
        if seen.contains(&name) {
            out.warn(
                &walk::child(&entry_path, "name"),
                format!("{name} is listed more than once: give each resource one entry"),
            );
        } else {
            seen.push(name);
        }
    }
}

/// Checks one resource to share at `path`; returns its normalised name when it has a valid one.
fn check_resource(
    value: &Value,
    path: &str,
    rename_by_default: bool,
    strategy: Strategy,
    out: &mut Findings,
) -> Option<String> {
    // The plugin reads a null entry as one without any field.
    let map = walk::entry(value, path, "a mapping with name and replicas", out)?;
    let fields = walk::fields(map, path, RESOURCE, Keys::Exact, out);
    let field = |name: &str| fields.iter().find(|field| field.name == name);

    let name = match field("name") {
        None => {
            out.error(
                &walk::child(path, "name"),
                "no resource name specified: add e.g. `name: nvidia.com/gpu`",
            );
            None
        }
        Some(name) => resource_name(name.value, &name.path, out),
    };
    match field("replicas") {
        None => out.error(
            &walk::child(path, "replicas"),
            format!("no replicas specified: add `replicas: N` with N of at least {MIN_REPLICAS}"),
        ),
        Some(replicas) => {
            let count = match walk::untagged(replicas.value) {
                Value::Null => Some(0),
                _ => walk::integer(replicas.value, &replicas.path, out),
            };
            if let Some(count) = count.filter(|count| *count < MIN_REPLICAS) {
                out.error(
                    &replicas.path,
                    format!(
                        "number of replicas must be >= {MIN_REPLICAS}, found {count}: to stop \
                         sharing, remove this entry"
                    ),
                );
            }
        }
    }
    if let Some(devices) = field("devices")
        && devices::check(devices.value, &devices.path, out) == Some(Devices::Some)
    {
        out.warn(
            &devices.path,
            "the device plugin does not support selecting devices yet: it ignores `devices` and \
             shares all of them",
        );
    }
    let rename = field("rename").map(|rename| {
        let renamed = resource_name(rename.value, &rename.path, out);
        (rename.path.as_str(), renamed)
    });
    let name = name?;
    check_name_use(&name, path, strategy, out);
    if let Some((rename_path, Some(rename))) = rename {
        let shared = format!("{name}{SHARED_SUFFIX}");
        if !rename_by_default {
            out.warn(
                rename_path,
                format!(
                    "the device plugin does not support `rename` yet: it ignores it and keeps \
                     advertising {name}; set `renameByDefault: true` to advertise {shared}"
                ),
            );
        } else if rename != shared {
            out.warn(
                rename_path,
                format!(
                    "the device plugin does not support `rename` yet: with renameByDefault it \
                     advertises {shared}, not {rename}"
                ),
            );
        }
    }
    Some(name)
}

/// A resource name at `path`, normalised; `None` when the plugin refuses it.
fn resource_name(value: &Value, path: &str, out: &mut Findings) -> Option<String> {
    let raw = walk::strict_text(value, path, out)?;
    names::normalise(&raw)
        .map_err(|error| out.error(path, error))
        .ok()
}

/// Warns when a valid name can never match a resource the plugin shares.
fn check_name_use(name: &str, path: &str, strategy: Strategy, out: &mut Findings) {
    let path = walk::child(path, "name");
    if !names::is_sharable(name) {
        out.warn(
            &path,
            format!(
                "the device plugin advertises no resource {name}, so this entry shares nothing: \
                 use {} or a MIG resource such as nvidia.com/mig-1g.10gb (migStrategy mixed)",
                names::GPU
            ),
        );
    } else if strategy == Strategy::Mps && names::is_mig_resource(name) {
        out.warn(
            &path,
            format!(
                "MPS shares full GPUs only: {name} is a MIG device, which needs migStrategy \
                 mixed, and the device plugin refuses MPS with it; share MIG devices with \
                 timeSlicing"
            ),
        );
    }
}
