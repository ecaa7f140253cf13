//! The MIG manager rendered for every example ClusterPolicy × node profile, and its default MIG
//! layouts read back as mig-parted reads them.
#![allow(clippy::unwrap_used)]

use gpu_operator_core::fixtures;
use gpu_operator_mig_manager::{MigManager, default_config, layouts};

#[test]
fn every_example_on_every_profile() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for (name, rendered) in fixtures::snapshots::<MigManager>(&root).unwrap() {
        insta::assert_yaml_snapshot!(name, rendered);
    }
}

#[test]
fn the_default_layouts_are_a_valid_mig_parted_config_with_every_gpus_profiles() {
    let config = default_config().unwrap();
    let names = layouts(&config).unwrap();
    for layout in [
        "all-disabled",
        "all-enabled",
        "all-balanced",
        // A100 40 GB
        "all-1g.5gb",
        "all-1g.5gb.me",
        "all-7g.40gb",
        // A100 80 GB and H100 80 GB
        "all-1g.10gb",
        "all-1g.10gb.me",
        "all-3g.40gb",
        "all-7g.80gb",
        // H200
        "all-1g.18gb",
        "all-7g.141gb",
        // A30
        "all-1g.6gb",
        "all-2g.12gb.me",
        "all-4g.24gb",
    ] {
        assert!(names.contains(layout), "{layout} missing from {names:?}");
    }
    let parsed: serde_yaml::Value = serde_yaml::from_str(&config).unwrap();
    let h100 = &parsed["mig-configs"]["all-1g.10gb"];
    let entry = h100
        .as_sequence()
        .unwrap()
        .iter()
        .find(|e| {
            e["device-filter"]
                .as_sequence()
                .unwrap()
                .contains(&"0x233010DE".into())
        })
        .unwrap();
    assert_eq!(entry["mig-devices"]["1g.10gb"], 7);
    insta::assert_snapshot!("default-mig-parted-config", config);
}
