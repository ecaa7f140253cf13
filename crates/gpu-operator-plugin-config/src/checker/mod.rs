//! A pure checker for NVIDIA k8s-device-plugin configuration files: the values of the ConfigMap
//! named by ClusterPolicy `devicePlugin.config.name`, one file per key, which the device plugin,
//! GPU Feature Discovery and the MPS control daemon all read. [`check`] reads one file the way
//! the plugin's loader does (YAML turned into JSON, then Go's `encoding/json` with the plugin's
//! own decoders) and reports what the plugin would reject (it would fail to start or
//! crash-loop) as errors, and what it accepts but ignores or overrides as warnings, each naming
//! the field and the fix. Node-dependent problems (a MIG layout, whether NVML exists) are out of
//! its reach.

mod devices;
mod duration;
mod flags;
mod imex;
mod names;
mod resources;
mod sharing;
mod walk;

#[cfg(test)]
mod tests;

use std::fmt;

use serde::Deserialize as _;
use serde_yaml::Value;

use walk::{Keys, Setting};

/// One thing found in a device plugin configuration: where (a field path such as
/// `sharing.timeSlicing.resources[0].replicas`, empty for the whole document) and what, said so
/// a user knows the fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// The field path, such as `flags.plugin.deviceListStrategy[1]`; empty for the whole document.
    pub field: String,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.field, self.message)
        }
    }
}

/// What checking one configuration found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Findings {
    /// What the device plugin rejects (it would fail to start or crash-loop).
    pub errors: Vec<Finding>,
    /// What it accepts but silently ignores or overrides: an unknown key, `flags.renameByDefault`,
    /// both timeSlicing and mps, a non-default rename or devices that get stripped, `resources`
    /// customisation, ...
    pub warnings: Vec<Finding>,
}

impl Findings {
    fn error(&mut self, field: &str, message: impl Into<String>) {
        self.errors.push(Finding {
            field: field.to_owned(),
            message: message.into(),
        });
    }

    fn warn(&mut self, field: &str, message: impl Into<String>) {
        self.warnings.push(Finding {
            field: field.to_owned(),
            message: message.into(),
        });
    }
}

/// The top-level sections of a configuration file.
const SECTIONS: &[&str] = &["version", "flags", "resources", "sharing", "imex"];

/// The only configuration version.
const VERSION: &str = "v1";

/// Checks one configuration file's text.
pub fn check(text: &str) -> Findings {
    let mut out = Findings::default();
    match first_document(text) {
        Ok((document, more)) => {
            if more {
                out.warn(
                    "",
                    "the file holds more than one YAML document: the device plugin reads only the \
                     first; remove the `---` and what follows it",
                );
            }
            check_document(&document, &mut out);
        }
        Err(error) => out.error("", format!("not valid YAML: {error}")),
    }
    out
}

/// The first YAML document of `text` with merge keys (`<<`) applied, and whether more follow.
/// An empty text is a null document: the defaults.
fn first_document(text: &str) -> Result<(Value, bool), serde_yaml::Error> {
    let mut documents = serde_yaml::Deserializer::from_str(text);
    let Some(first) = documents.next() else {
        return Ok((Value::Null, false));
    };
    let mut value = Value::deserialize(first)?;
    value.apply_merge()?;
    Ok((value, documents.next().is_some()))
}

fn check_document(document: &Value, out: &mut Findings) {
    let document = walk::untagged(document);
    if document.is_null() {
        return;
    }
    let Value::Mapping(map) = document else {
        out.error(
            "",
            format!(
                "the configuration must be a mapping of version, flags, sharing, resources and \
                 imex, found {}",
                walk::kind(document)
            ),
        );
        return;
    };
    let mut flags = flags::Facts::default();
    let mut mps = None;
    for field in walk::fields(map, "", SECTIONS, Keys::AnyCase, out) {
        match field.name {
            "version" => check_version(field.value, &field.path, out),
            "flags" => flags = flags::check(field.value, &field.path, out),
            "resources" => resources::check(field.value, &field.path, out),
            "sharing" => mps = sharing::check(field.value, &field.path, out),
            "imex" => imex::check(field.value, &field.path, out),
            _ => {}
        }
    }
    if let Some(mps) = mps {
        check_mps_flags(&flags, &mps, out);
    }
}

fn check_version(value: &Value, path: &str, out: &mut Findings) {
    let version = walk::text(value, path, out).unwrap_or_default();
    if !version.is_empty() && version != VERSION {
        out.error(
            path,
            format!("unknown version `{version}`: the only version is v1 (or leave it out)"),
        );
    }
}

/// What the device plugin refuses at startup when MPS sharing is configured at `mps`.
fn check_mps_flags(flags: &flags::Facts, mps: &str, out: &mut Findings) {
    if let Some(Setting { path, value }) = &flags.mig_strategy
        && value == "mixed"
    {
        out.error(
            path,
            format!(
                "migStrategy mixed is not supported with MPS sharing ({mps}): use single or \
                 none, or share MIG devices with timeSlicing"
            ),
        );
    }
    if let Some(Setting { path, value }) = &flags.mps_root
        && value.is_empty()
    {
        out.error(
            path,
            format!(
                "MPS sharing ({mps}) needs an MPS root, but mpsRoot is empty: remove the key \
                 (the operator sets it) or give a host directory such as /run/nvidia/mps"
            ),
        );
    }
}
