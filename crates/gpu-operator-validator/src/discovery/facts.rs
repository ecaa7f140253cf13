//! What the discovery agent reads from the host (pure over a root directory, so tests use fake
//! trees): NVIDIA PCI devices and their classes from sysfs, the kernel release, and os-release;
//! and the NFD labels those facts give.

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::Path,
};

use gpu_operator_api::labels::{NFD_KERNEL_VERSION, NFD_OS_RELEASE_ID, NFD_OS_RELEASE_VERSION_ID};

/// NVIDIA's PCI vendor ID as sysfs prints it.
const NVIDIA_VENDOR: &str = "0x10de";
/// `feature.node.kubernetes.io/pci-10de.present`: some NVIDIA PCI device (NFD with
/// `deviceLabelFields: [vendor]`, NVIDIA's NFD configuration).
pub const PCI_VENDOR_PRESENT: &str = "feature.node.kubernetes.io/pci-10de.present";
/// `pci-0300_10de.present`: an NVIDIA VGA controller (NFD's default class+vendor form).
pub const PCI_VGA_PRESENT: &str = "feature.node.kubernetes.io/pci-0300_10de.present";
/// `pci-0302_10de.present`: an NVIDIA 3D controller (data-center GPUs).
pub const PCI_3D_PRESENT: &str = "feature.node.kubernetes.io/pci-0302_10de.present";

/// Every label the agent may write, and so the only labels it may ever remove.
pub const AGENT_LABELS: [&str; 6] = [
    PCI_VENDOR_PRESENT,
    PCI_VGA_PRESENT,
    PCI_3D_PRESENT,
    NFD_KERNEL_VERSION,
    NFD_OS_RELEASE_ID,
    NFD_OS_RELEASE_VERSION_ID,
];

/// Where the facts are under the host root.
const PCI_DEVICES: &str = "sys/bus/pci/devices";
const KERNEL_RELEASE: &str = "proc/sys/kernel/osrelease";
const OS_RELEASE: [&str; 2] = ["etc/os-release", "usr/lib/os-release"];

/// The host facts the labels are made of.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct HostFacts {
    /// Whether some PCI device has NVIDIA's vendor ID.
    pub nvidia_pci: bool,
    /// PCI class and subclass (`0302`) of every NVIDIA device.
    pub nvidia_classes: BTreeSet<String>,
    /// The kernel release (`uname -r`).
    pub kernel: Option<String>,
    /// os-release `ID`.
    pub os_id: Option<String>,
    /// os-release `VERSION_ID`.
    pub os_version_id: Option<String>,
}

/// Reads the facts under `root` (the host's `/` as mounted in the container). The agent calls
/// it with `kernel_fallback` set: the kernel release then comes from this process's own `/proc`
/// when `root` has none (containers share the host's kernel, so the host's `/proc` need not be
/// mounted).
pub fn read(root: &Path, kernel_fallback: bool) -> HostFacts {
    let mut facts = HostFacts::default();
    for device in fs::read_dir(root.join(PCI_DEVICES)).into_iter().flatten() {
        let Ok(device) = device else { continue };
        let read = |name: &str| fs::read_to_string(device.path().join(name)).unwrap_or_default();
        if !read("vendor").trim().eq_ignore_ascii_case(NVIDIA_VENDOR) {
            continue;
        }
        facts.nvidia_pci = true;
        // `0x030200`: class 03, subclass 02, programming interface 00.
        let class = read("class");
        if let Some(class) = class.trim().strip_prefix("0x").and_then(|c| c.get(..4)) {
            facts.nvidia_classes.insert(class.to_ascii_lowercase());
        }
    }
    facts.kernel = fs::read_to_string(root.join(KERNEL_RELEASE))
        .or_else(|e| {
            if kernel_fallback {
                fs::read_to_string(Path::new("/").join(KERNEL_RELEASE))
            } else {
                Err(e)
            }
        })
        .ok()
        .map(|k| k.trim().to_owned())
        .filter(|k| !k.is_empty());
    if let Some(text) = OS_RELEASE
        .iter()
        .find_map(|p| fs::read_to_string(root.join(p)).ok())
    {
        let fields = parse_os_release(&text);
        facts.os_id = fields.get("ID").cloned();
        facts.os_version_id = fields.get("VERSION_ID").cloned();
    }
    facts
}

/// `KEY=value` lines of os-release, quotes removed; comments and blank lines skipped.
pub fn parse_os_release(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| {
            let v = v.trim();
            let unquoted = ['"', '\'']
                .iter()
                .find_map(|q| v.strip_prefix(*q).and_then(|v| v.strip_suffix(*q)))
                .unwrap_or(v);
            (k.trim().to_owned(), unquoted.to_owned())
        })
        .collect()
}

/// Whether `value` may be a label value: at most 63 characters, alphanumerics with `-`, `_`
/// and `.` inside.
pub fn is_label_value(value: &str) -> bool {
    let bytes = value.as_bytes();
    let edge = |b: Option<&u8>| b.is_none_or(u8::is_ascii_alphanumeric);
    value.len() <= 63
        && edge(bytes.first())
        && edge(bytes.last())
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// The labels the facts give (values that are not valid label values are left out, as NFD does).
pub fn labels(facts: &HostFacts) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    let mut flag = |key: &str, on: bool| {
        if on {
            labels.insert(key.to_owned(), "true".to_owned());
        }
    };
    flag(PCI_VENDOR_PRESENT, facts.nvidia_pci);
    flag(PCI_VGA_PRESENT, facts.nvidia_classes.contains("0300"));
    flag(PCI_3D_PRESENT, facts.nvidia_classes.contains("0302"));
    for (key, value) in [
        (NFD_KERNEL_VERSION, &facts.kernel),
        (NFD_OS_RELEASE_ID, &facts.os_id),
        (NFD_OS_RELEASE_VERSION_ID, &facts.os_version_id),
    ] {
        match value {
            Some(v) if is_label_value(v) => {
                labels.insert(key.to_owned(), v.clone());
            }
            Some(v) => tracing::warn!("{key}: {v:?} is not a valid label value; not labelled"),
            None => {}
        }
    }
    labels
}

#[cfg(test)]
mod tests;
