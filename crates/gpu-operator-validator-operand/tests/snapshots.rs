//! Snapshots of everything the validator renders, for every example ClusterPolicy ×
//! every node profile (`<example>-<profile>`).
#![allow(clippy::unwrap_used)]

use gpu_operator_core::fixtures;
use gpu_operator_validator_operand::Validation;

#[test]
fn every_example_on_every_profile() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for (name, rendered) in fixtures::snapshots::<Validation>(&root).unwrap() {
        insta::assert_yaml_snapshot!(name, rendered);
    }
}
