//! The default MIG layouts cover every layout name of NVIDIA's v26.7 `default-mig-parted-config`
//! (the names NVIDIA's users put in `nvidia.com/mig.config`), and each name carries the profile
//! facts of the GPUs it is for.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::collections::BTreeSet;

use gpu_operator_mig_manager::{default_config, layouts};

fn nvidia_names() -> BTreeSet<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/fixtures/nvidia/mig-parted-default-layout-names.txt");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (the shared NVIDIA fixtures)", path.display()));
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_layout_name_of_nvidias_default_config_is_ours() {
    let nvidia = nvidia_names();
    assert_eq!(nvidia.len(), 81, "the fixture lists 81 names");
    let ours: BTreeSet<String> = layouts(&default_config().unwrap())
        .unwrap()
        .into_iter()
        .collect();
    let missing: Vec<_> = nvidia.difference(&ours).collect();
    assert!(missing.is_empty(), "NVIDIA's layouts we lack: {missing:?}");
    let extra: Vec<_> = ours.difference(&nvidia).collect();
    assert!(
        extra.is_empty(),
        "layouts NVIDIA's users never saw: {extra:?}"
    );
}

/// Instances per profile on one GPU, from the GPU facts (a hand-written table: MIG slices and
/// memory per model, gpu-ecosystem.md §3.3 and NVIDIA's MIG user guide).
#[test]
fn layouts_carry_each_gpus_profile_facts() {
    let config: serde_yaml::Value = serde_yaml::from_str(&default_config().unwrap()).unwrap();
    for (layout, device, profile, count) in [
        ("all-1g.10gb", "0x233010DE", "1g.10gb", 7), // H100 80 GB: 7 slices
        ("all-1g.10gb", "0x20B010DE", "1g.10gb", 4), // A100 40 GB: 1g.10gb is two memory slices
        ("all-7g.94gb", "0x232110DE", "7g.94gb", 1), // H100 NVL
        ("all-3g.48gb", "0x234210DE", "3g.48gb", 2), // GH200 96 GB
        ("all-7g.144gb", "0x234810DE", "7g.144gb", 1), // GH200 144 GB
        ("all-1g.23gb", "0x290110DE", "1g.23gb", 7), // B200
        ("all-2g.47gb", "0x294110DE", "2g.47gb", 3), // GB200
        ("all-1g.34gb.me", "0x318210DE", "1g.34gb+me", 1), // B300
        ("all-1g.35gb", "0x31C210DE", "1g.35gb", 7), // GB300
        ("all-1g.35gb", "0x233510DE", "1g.35gb", 4), // H200
        ("all-1g.24gb.gfx", "0x2BB510DE", "1g.24gb+gfx", 4), // RTX PRO 6000: 4 slices
        ("all-1g.24gb-me", "0x2BB510DE", "1g.24gb-me", 4),
        ("all-2g.48gb.me.all", "0x2BB510DE", "2g.48gb+me.all", 1),
        ("all-4g.24gb", "0x20B710DE", "4g.24gb", 1), // A30
    ] {
        let entries = config["mig-configs"][layout].as_sequence().unwrap();
        let entry = entries
            .iter()
            .find(|e| {
                e["device-filter"]
                    .as_sequence()
                    .is_some_and(|f| f.contains(&device.into()))
            })
            .unwrap_or_else(|| panic!("{layout} has no entry for {device}"));
        assert_eq!(
            entry["mig-devices"][profile].as_u64(),
            Some(count),
            "{layout} on {device}"
        );
    }
}
