//! A ClusterPolicy spec as the API server hands it over (JSON): whatever deserialises goes through
//! every operand's validate and render on every node profile, and the labeller.
#![no_main]

use gpu_operator_api::ClusterPolicySpec;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(spec) = serde_json::from_slice::<ClusterPolicySpec>(data) {
        gpu_operator_fuzz::every_operand(&spec);
    }
});
