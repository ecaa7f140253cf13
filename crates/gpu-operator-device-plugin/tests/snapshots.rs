//! Snapshots of everything the device plugin renders, for every example ClusterPolicy × every
//! node profile (`<example>-<profile>`).
#![allow(clippy::unwrap_used)]

use gpu_operator_core::fixtures;
use gpu_operator_device_plugin::DevicePlugin;

#[test]
fn every_example_on_every_profile() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for (name, rendered) in fixtures::snapshots::<DevicePlugin>(&root).unwrap() {
        insta::assert_yaml_snapshot!(name, rendered);
    }
}
