//! The MIG layouts of `default-mig-parted-config`, generated from one table of MIG-capable GPU
//! models (PCI device IDs, the MIG profiles each offers with the most instances that fit, and a
//! balanced mix). Every layout is named as users know them: `all-disabled`, `all-enabled`,
//! `all-balanced` and `all-<profile>` (a `+me` profile is spelled `.me`).

use std::collections::BTreeMap;

use gpu_operator_api::spec::MigPartedConfigSpec;
use serde::Serialize;

/// NVIDIA's PCI vendor ID, the low half of a mig-parted device filter.
const NVIDIA_VENDOR: u32 = 0x10DE;

/// One family of GPUs that partition alike.
struct Model {
    /// PCI device IDs of the family; empty: its layouts apply to any GPU (no device filter).
    devices: &'static [u32],
    /// Extra device IDs that get only the balanced layout.
    balanced_only: &'static [u32],
    /// Each profile with the most instances of it one GPU holds.
    profiles: &'static [(&'static str, u32)],
    /// The balanced mix; empty: no balanced layout for the family.
    balanced: &'static [(&'static str, u32)],
}

/// The MIG-capable models of the default layouts, written from the GPU facts of
/// `reference/gpu-ecosystem.md` §3.3 (slices and memory per profile).
const MODELS: [Model; 13] = [
    // A100 40 GB and A800 40 GB.
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
    // A100 80 GB, A800 80 GB, H100 80 GB and H800 80 GB (they slice identically).
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
    // H100 NVL and H800 NVL, 94 GB.
    Model {
        devices: &[0x2321, 0x233A],
        balanced_only: &[],
        profiles: &[
            ("1g.12gb", 7),
            ("1g.12gb+me", 1),
            ("1g.24gb", 4),
            ("2g.24gb", 3),
            ("3g.47gb", 2),
            ("4g.47gb", 1),
            ("7g.94gb", 1),
        ],
        balanced: &[("1g.12gb", 2), ("2g.24gb", 1), ("3g.47gb", 1)],
    },
    // 96 GB Hopper: GH200 96 GB, H100 96 GB and H20.
    Model {
        devices: &[0x2342, 0x233D, 0x20B6, 0x2329],
        balanced_only: &[],
        profiles: &[
            ("1g.12gb", 7),
            ("1g.12gb+me", 1),
            ("1g.24gb", 4),
            ("2g.24gb", 3),
            ("3g.48gb", 2),
            ("4g.48gb", 1),
            ("7g.96gb", 1),
        ],
        balanced: &[("1g.12gb", 2), ("2g.24gb", 1), ("3g.48gb", 1)],
    },
    // H200 141 GB (H200 NVL 0x233B gets only the balanced layout).
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
    // GH200 144 GB.
    Model {
        devices: &[0x2348],
        balanced_only: &[],
        profiles: &[
            ("1g.18gb", 7),
            ("1g.18gb+me", 1),
            ("1g.36gb", 4),
            ("2g.36gb", 3),
            ("3g.72gb", 2),
            ("4g.72gb", 1),
            ("7g.144gb", 1),
        ],
        balanced: &[("1g.18gb", 2), ("2g.36gb", 1), ("3g.72gb", 1)],
    },
    // A30 24 GB.
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
    // B200 180 GB.
    Model {
        devices: &[0x2901],
        balanced_only: &[],
        profiles: &[
            ("1g.23gb", 7),
            ("1g.23gb+me", 1),
            ("1g.45gb", 4),
            ("2g.45gb", 3),
            ("3g.90gb", 2),
            ("4g.90gb", 1),
            ("7g.180gb", 1),
        ],
        balanced: &[("1g.23gb", 2), ("2g.45gb", 1), ("3g.90gb", 1)],
    },
    // GB200 186 GB.
    Model {
        devices: &[0x2941],
        balanced_only: &[],
        profiles: &[
            ("1g.23gb", 7),
            ("1g.23gb+me", 1),
            ("1g.47gb", 4),
            ("2g.47gb", 3),
            ("3g.93gb", 2),
            ("4g.93gb", 1),
            ("7g.186gb", 1),
        ],
        balanced: &[("1g.23gb", 2), ("2g.47gb", 1), ("3g.93gb", 1)],
    },
    // Blackwell 189 GB: its device ID is not among our facts, so its layouts carry no device filter (the profile names are its own).
    Model {
        devices: &[],
        balanced_only: &[],
        profiles: &[("3g.95gb", 2), ("4g.95gb", 1), ("7g.189gb", 1)],
        balanced: &[],
    },
    // B300 270 GB.
    Model {
        devices: &[0x3182],
        balanced_only: &[],
        profiles: &[
            ("1g.34gb", 7),
            ("1g.34gb+me", 1),
            ("1g.67gb", 4),
            ("2g.67gb", 3),
            ("3g.135gb", 2),
            ("4g.135gb", 1),
            ("7g.269gb", 1),
        ],
        balanced: &[("1g.34gb", 2), ("2g.67gb", 1), ("3g.135gb", 1)],
    },
    // GB300 279 GB.
    Model {
        devices: &[0x31C2],
        balanced_only: &[],
        profiles: &[
            ("1g.35gb", 7),
            ("1g.35gb+me", 1),
            ("1g.70gb", 4),
            ("2g.70gb", 3),
            ("3g.139gb", 2),
            ("4g.139gb", 1),
            ("7g.278gb", 1),
        ],
        balanced: &[("1g.35gb", 2), ("2g.70gb", 1), ("3g.139gb", 1)],
    },
    // RTX PRO 6000 Blackwell 96 GB: four slices, with graphics (`+gfx`), all-media (`+me.all`) and no-media (`-me`) variants.
    Model {
        devices: &[0x2BB5],
        balanced_only: &[],
        profiles: &[
            ("1g.24gb", 4),
            ("1g.24gb+me", 1),
            ("1g.24gb+gfx", 4),
            ("1g.24gb-me", 4),
            ("1g.24gb+me.all", 1),
            ("2g.48gb", 2),
            ("2g.48gb+gfx", 2),
            ("2g.48gb-me", 2),
            ("2g.48gb+me.all", 1),
            ("4g.96gb", 1),
            ("4g.96gb+gfx", 1),
        ],
        balanced: &[("1g.24gb", 2), ("2g.48gb", 1)],
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

/// The layout name of `all-<profile>`: `+` becomes `.` (`1g.10gb+me` is `all-1g.10gb.me`); `-me`
/// stays.
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
        device_filter: (!devices.is_empty()).then(|| filter(devices)),
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
        MigPartedConfigSpec::DEFAULT_LAYOUT.to_owned(),
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
        if model.balanced.is_empty() {
            continue;
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
    let header = "# MIG layouts for A100, A30, Hopper, Blackwell and RTX PRO GPUs, generated by the GPU operator.\n\
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
