//! DCGM rendered for every example ClusterPolicy × node profile.
#![allow(clippy::unwrap_used)]

use gpu_operator_core::fixtures;
use gpu_operator_dcgm_hostengine::Dcgm;

#[test]
fn every_example_on_every_profile() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for (name, rendered) in fixtures::snapshots::<Dcgm>(&root).unwrap() {
        insta::assert_yaml_snapshot!(name, rendered);
    }
}
