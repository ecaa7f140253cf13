//! A node's labels (lines of `key=value`) through the node cache's projection, the cluster facts
//! and the labeller's changes for the default ClusterPolicy.
#![no_main]

use std::collections::BTreeMap;

use gpu_operator_api::ClusterPolicySpec;
use gpu_operator_core::cache::{facts::ClusterFacts, node_meta::NodeMeta};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let labels: BTreeMap<String, String> = text
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(key, value)| (key.to_owned(), value.to_owned()))
        .collect();
    let pairs: Vec<(&str, &str)> = labels
        .iter()
        .map(|(key, value)| (key.as_str(), value.as_str()))
        .collect();
    let node = NodeMeta::new("fuzzed", &pairs);
    let _ = ClusterFacts::from_nodes([&node], []);
    let _ =
        gpu_operator_node_labels::desired::label_changes(&labels, &ClusterPolicySpec::default());
});
