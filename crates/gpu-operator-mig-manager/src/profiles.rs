//! The MIG layouts of `default-mig-parted-config`, generated from one table of MIG-capable GPU
//! models (PCI device IDs, the MIG profiles each offers with the most instances that fit, and a
//! balanced mix). Every layout is named as users know them: `all-disabled`, `all-enabled`,
//! `all-balanced` and `all-<profile>` (a `+me` profile is spelled `.me`).

use std::collections::BTreeMap;

use serde::Serialize;

/// NVIDIA's PCI vendor ID, the low half of a mig-parted device filter.
const NVIDIA_VENDOR: u32 = 0x10DE;

/// One family of GPUs that partition alike.
struct Model {
    /// PCI device IDs of the family.
    devices: &'static [u32],
    /// Extra device IDs that get only the balanced layout.
    balanced_only: &'static [u32],
    /// Each profile with the most instances of it one GPU holds.
    profiles: &'static [(&'static str, u32)],
    /// The balanced mix.
    balanced: &'static [(&'static str, u32)],
}

/// The MIG-capable models of the default layouts: A100 40 GB (and A800), A100 80 GB (and A800)
/// together with H100 80 GB (and H800), which slice identically, H200 141 GB, and A30 24 GB.
const MODELS: [Model; 4] = [
    Model {
        devices: &[0x20B0, 0x20B1, 0x20F1, 0x20F6],
        balanced_only: &[],
        profiles: &[
            ("1g.5gb", 7),
            ("1g.5gb+me", 1),
            ("1g.10gb", 4),
            ("2g.10gb", 3),
            ("3g.20gb", 2),
            ("4g.20gb", 1),
            ("7g.40gb", 1),
        ],
        balanced: &[("1g.5gb", 2), ("2g.10gb", 1), ("3g.20gb", 1)],
    },
    Model {
        devices: &[
            0x20B2, 0x20B5, 0x20F3, 0x20F5, 0x2330, 0x2331, 0x2322, 0x2324,
        ],
        balanced_only: &[],
        profiles: &[
            ("1g.10gb", 7),
            ("1g.10gb+me", 1),
            ("1g.20gb", 4),
            ("2g.20gb", 3),
            ("3g.40gb", 2),
            ("4g.40gb", 1),
            ("7g.80gb", 1),
        ],
        balanced: &[("1g.10gb", 2), ("2g.20gb", 1), ("3g.40gb", 1)],
    },
    Model {
        devices: &[0x2335],
        balanced_only: &[0x233B],
        profiles: &[
            ("1g.18gb", 7),
            ("1g.18gb+me", 1),
            ("1g.35gb", 4),
            ("2g.35gb", 3),
            ("3g.71gb", 2),
            ("4g.71gb", 1),
            ("7g.141gb", 1),
        ],
        balanced: &[("1g.18gb", 2), ("2g.35gb", 1), ("3g.71gb", 1)],
    },
    Model {
        devices: &[0x20B7],
        balanced_only: &[],
        profiles: &[
            ("1g.6gb", 4),
            ("1g.6gb+me", 1),
            ("2g.12gb", 2),
            ("2g.12gb+me", 1),
            ("4g.24gb", 1),
        ],
        balanced: &[("1g.6gb", 2), ("2g.12gb", 1)],
    },
];

/// One entry of a mig-parted layout.
#[derive(Serialize)]
struct Entry {
    #[serde(rename = "device-filter", skip_serializing_if = "Option::is_none")]
    device_filter: Option<Vec<String>>,
    devices: &'static str,
    #[serde(rename = "mig-enabled")]
    mig_enabled: bool,
    #[serde(rename = "mig-devices", skip_serializing_if = "Option::is_none")]
    mig_devices: Option<BTreeMap<String, u32>>,
}

/// A mig-parted configuration file.
#[derive(Serialize)]
struct Config {
    version: &'static str,
    #[serde(rename = "mig-configs")]
    mig_configs: BTreeMap<String, Vec<Entry>>,
}

/// The layout name of `all-<profile>`: `+me` becomes `.me`.
fn layout_name(profile: &str) -> String {
    format!("all-{}", profile.replace('+', "."))
}

fn filter(devices: &[u32]) -> Vec<String> {
    devices
        .iter()
        .map(|d| format!("0x{d:04X}{NVIDIA_VENDOR:04X}"))
        .collect()
}

fn enabled(devices: &[u32], instances: &[(&str, u32)]) -> Entry {
    Entry {
        device_filter: Some(filter(devices)),
        devices: "all",
        mig_enabled: true,
        mig_devices: Some(
            instances
                .iter()
                .map(|(profile, count)| ((*profile).to_owned(), *count))
                .collect(),
        ),
    }
}

fn layouts() -> BTreeMap<String, Vec<Entry>> {
    let mut layouts = BTreeMap::new();
    layouts.insert(
        "all-disabled".to_owned(),
        vec![Entry {
            device_filter: None,
            devices: "all",
            mig_enabled: false,
            mig_devices: None,
        }],
    );
    layouts.insert(
        "all-enabled".to_owned(),
        vec![Entry {
            device_filter: None,
            devices: "all",
            mig_enabled: true,
            mig_devices: Some(BTreeMap::new()),
        }],
    );
    for model in &MODELS {
        for (profile, most) in model.profiles {
            layouts
                .entry(layout_name(profile))
                .or_insert_with(Vec::new)
                .push(enabled(model.devices, &[(profile, *most)]));
        }
        let devices: Vec<u32> = model
            .devices
            .iter()
            .chain(model.balanced_only)
            .copied()
            .collect();
        layouts
            .entry("all-balanced".to_owned())
            .or_insert_with(Vec::new)
            .push(enabled(&devices, model.balanced));
    }
    layouts
}

/// `config.yaml` of `default-mig-parted-config`.
pub fn default_config() -> Result<String, serde_yaml::Error> {
    let header = "# MIG layouts for A100, A30, H100 and H200 GPUs, generated by the GPU operator.\n\
                  # Select one per node: kubectl label node <node> nvidia.com/mig.config=<layout>\n";
    let body = serde_yaml::to_string(&Config {
        version: "v1",
        mig_configs: layouts(),
    })?;
    Ok(format!("{header}{body}"))
}

/// The layout names of the default config.
pub fn default_layouts() -> Vec<String> {
    layouts().into_keys().collect()
}
