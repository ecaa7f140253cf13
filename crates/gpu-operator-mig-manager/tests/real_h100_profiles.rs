//! The default MIG layouts against a real GPU: `nvidia-smi mig -lgip` of an NVIDIA H100 80GB HBM3
//! (PCI device 0x2330, driver 580.159.04; captured on a lent GPU machine, see the validator's
//! `tests/fixtures/README.md`) lists every GPU instance profile and how many instances fit. Each
//! `all-<profile>` layout for that device must ask for exactly that many, and no layout may name a
//! profile the GPU does not offer.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;

use serde_yaml::Value;

const CAPTURES: &str = "../gpu-operator-validator/tests/fixtures";
const CAPTURE: &str = "h100-80gb-hbm3_580.159.04";

fn capture(kind: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(CAPTURES)
        .join(format!("{kind}_{CAPTURE}.txt"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Profile name → total instances, from the `|   0  MIG 1g.10gb   19   7/7 …` rows.
fn real_profiles() -> BTreeMap<String, u64> {
    capture("nvidia-smi-mig-lgip")
        .lines()
        .filter_map(|line| {
            let words: Vec<&str> = line.trim_matches('|').split_whitespace().collect();
            let at = words.iter().position(|w| *w == "MIG")?;
            let (_, total) = words.get(at + 3)?.split_once('/')?;
            Some((words[at + 1].to_owned(), total.parse().ok()?))
        })
        .collect()
}

/// The mig-parted device filter of the captured GPU, from its sysfs PCI IDs.
fn device_filter() -> String {
    let line = capture("host-devices-ldconfig-os-pci")
        .lines()
        .find(|l| l.starts_with("/sys/bus/pci/devices/"))
        .unwrap()
        .to_owned();
    let ids: Vec<&str> = line.split_whitespace().collect();
    let (vendor, device) = (
        ids[1].trim_start_matches("0x"),
        ids[3].trim_start_matches("0x"),
    );
    format!("0x{}{}", device.to_uppercase(), vendor.to_uppercase())
}

#[test]
fn every_h100_layout_asks_for_what_the_real_gpu_offers() {
    let real = real_profiles();
    assert_eq!(real.len(), 7, "the capture lists seven profiles: {real:?}");
    let filter = device_filter();
    assert_eq!(filter, "0x233010DE");
    let config: Value =
        serde_yaml::from_str(&gpu_operator_mig_manager::default_config().unwrap()).unwrap();
    let layouts = config["mig-configs"].as_mapping().unwrap();
    let for_h100 = |layout: &Value| -> Vec<BTreeMap<String, u64>> {
        layout
            .as_sequence()
            .unwrap()
            .iter()
            .filter(|entry| {
                entry["device-filter"]
                    .as_sequence()
                    .is_some_and(|f| f.iter().any(|d| d.as_str() == Some(filter.as_str())))
            })
            .map(|entry| serde_yaml::from_value(entry["mig-devices"].clone()).unwrap())
            .collect()
    };
    for (profile, total) in &real {
        let name = format!("all-{}", profile.replace('+', "."));
        let layout = layouts
            .get(Value::from(name.as_str()))
            .unwrap_or_else(|| panic!("no layout {name}"));
        assert_eq!(
            for_h100(layout),
            [BTreeMap::from([(profile.clone(), *total)])],
            "{name}"
        );
    }
    for (name, layout) in layouts {
        for devices in for_h100(layout) {
            for (profile, count) in &devices {
                let offered = real.get(profile).copied();
                assert!(
                    offered.is_some_and(|most| *count <= most),
                    "{name:?} asks for {count} × {profile}; the GPU offers {offered:?}"
                );
            }
        }
    }
}
