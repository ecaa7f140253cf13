//! Bad input, fuzzed (proptest, fixed case counts so the suite stays deterministic in cost): every
//! pure function that takes user input runs on mutated real input and must return, never panic.
//!
//! - ClusterPolicy specs: our examples and NVIDIA's sample ClusterPolicies of four releases, with
//!   random leaves replaced, keys removed and keys added; whatever deserialises goes through every
//!   operand's `validate` and `render` on every node profile, and the labeller's `label_changes`.
//! - The device-plugin and mig-parted configuration checkers, on mutated valid configurations and
//!   on arbitrary text; a YAML alias bomb is refused with a reason, quickly.
//! - Node labels: arbitrary label maps through the cluster facts and the labeller.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::{collections::BTreeMap, fmt::Write as _, path::Path, time::Instant};

use gpu_operator_api::{ClusterPolicy, ClusterPolicySpec};
use gpu_operator_core::{
    cache::{facts::ClusterFacts, node_meta::NodeMeta},
    contract::{Cluster, Operand},
    fixtures,
};
use gpu_operator_harness::mutate::{mutate, mutation, nvidia_sample_specs};
use gpu_operator_operands::Visit;
use gpu_operator_plugin_config::checker;
use proptest::prelude::*;
use serde_json::{Value, json};

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// The specs the mutations start from: our examples and NVIDIA's sample ClusterPolicies.
fn seeds() -> Vec<Value> {
    let mut seeds: Vec<Value> = fixtures::examples(root())
        .unwrap()
        .into_iter()
        .map(|(_, spec)| serde_json::to_value(spec).unwrap())
        .collect();
    seeds.extend(nvidia_sample_specs(root()).unwrap());
    assert!(seeds.len() >= 10, "{} seeds", seeds.len());
    seeds
}

/// Every operand's validate and render for `spec` on every profile; returns how many rendered.
fn run_every_operand(spec: &ClusterPolicySpec) -> usize {
    /// Each registered operand on one profile, counting those that rendered.
    struct Every<'a> {
        spec: &'a ClusterPolicySpec,
        cluster: Cluster<'a>,
        rendered: usize,
    }
    impl Visit for Every<'_> {
        fn operand<O: Operand<Owner = ClusterPolicy>>(&mut self) {
            if let Ok(Some(input)) = O::validate(self.spec, &self.cluster) {
                let _ = O::render(&input);
                let _ = O::warnings(&input);
                self.rendered += 1;
            }
        }
    }
    let mut rendered = 0;
    for profile in fixtures::profiles() {
        let mut every = Every {
            spec,
            cluster: Cluster {
                namespace: "gpu-operator",
                facts: &profile.facts,
                image_env: &fixtures::image_env,
                config_maps: &fixtures::plugin_configs,
                policy: None,
                server: gpu_operator_core::cache::server_facts::ServerFacts::unknown(),
            },
            rendered: 0,
        };
        gpu_operator_operands::visit_all(&mut every);
        rendered += every.rendered;
    }
    for labels in [
        BTreeMap::from([("nvidia.com/gpu.present".to_owned(), "true".to_owned())]),
        BTreeMap::new(),
    ] {
        let _ = gpu_operator_node_labels::desired::label_changes(&labels, spec);
    }
    rendered
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn mutated_cluster_policies_are_refused_or_rendered_never_a_panic(
        seed in any::<usize>(),
        mutations in prop::collection::vec(mutation(), 1..6),
    ) {
        let seeds = seeds();
        let doc = mutate(seeds[seed % seeds.len()].clone(), &mutations);
        if let Ok(spec) = serde_json::from_value::<ClusterPolicySpec>(doc) {
            run_every_operand(&spec);
        }
    }

    #[test]
    fn device_plugin_configs_are_checked_never_a_panic(
        seed in any::<usize>(),
        mutations in prop::collection::vec(mutation(), 0..6),
        text in ".{0,200}",
    ) {
        let configs = plugin_seeds();
        let doc = mutate(configs[seed % configs.len()].clone(), &mutations);
        let _ = checker::check(&serde_yaml::to_string(&doc).unwrap());
        let _ = checker::check(&text);
    }

    #[test]
    fn mig_parted_configs_are_checked_never_a_panic(
        mutations in prop::collection::vec(mutation(), 0..6),
        text in ".{0,200}",
    ) {
        let doc = mutate(mig_seed(), &mutations);
        let _ = gpu_operator_mig_manager::layouts(&serde_yaml::to_string(&doc).unwrap());
        let _ = gpu_operator_mig_manager::layouts(&text);
    }

    #[test]
    fn arbitrary_node_labels_are_read_never_a_panic(
        labels in prop::collection::btree_map(
            prop_oneof![
                Just("nvidia.com/gpu.present".to_owned()),
                Just("nvidia.com/gpu.workload.config".to_owned()),
                Just("nvidia.com/gpu.deploy.operands".to_owned()),
                Just("nvidia.com/mig.config".to_owned()),
                Just("nvidia.com/gpu.deploy.device-plugin".to_owned()),
                Just("feature.node.kubernetes.io/pci-10de.present".to_owned()),
                Just("feature.node.kubernetes.io/system-os_release.ID".to_owned()),
                Just("feature.node.kubernetes.io/kernel-version.full".to_owned()),
                "[a-z./-]{1,30}",
            ],
            prop_oneof![Just("true".to_owned()), Just("false".to_owned()), ".{0,20}"],
            0..10,
        ),
        seed in any::<usize>(),
    ) {
        let pairs: Vec<(&str, &str)> =
            labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let node = NodeMeta::new("fuzzed", &pairs);
        let _ = ClusterFacts::from_nodes([&node], []);
        let seeds = seeds();
        let spec: ClusterPolicySpec =
            serde_json::from_value(seeds[seed % seeds.len()].clone()).unwrap();
        let _ = gpu_operator_node_labels::desired::label_changes(&labels, &spec);
    }
}

/// Device-plugin configurations to mutate: time-slicing, MPS and flags.
fn plugin_seeds() -> Vec<Value> {
    vec![
        json!({"version": "v1", "sharing": {"timeSlicing": {"renameByDefault": false,
            "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}}),
        json!({"version": "v1", "sharing": {"mps": {"resources": [
            {"name": "nvidia.com/gpu", "replicas": 2, "devices": ["0", "1"]}]}}}),
        json!({"version": "v1", "flags": {"migStrategy": "mixed", "failOnInitError": true,
            "plugin": {"passDeviceSpecs": true, "deviceListStrategy": ["envvar", "cdi-annotations"]}}}),
    ]
}

/// A mig-parted configuration to mutate.
fn mig_seed() -> Value {
    json!({"version": "v1", "mig-configs": {
        "all-disabled": [{"devices": "all", "mig-enabled": false}],
        "custom": [{"device-filter": ["0x233010DE"], "devices": [0, 1], "mig-enabled": true,
                    "mig-devices": {"1g.10gb": 7}}],
    }})
}

#[test]
fn a_yaml_alias_bomb_is_refused_with_a_reason_in_bounded_time() {
    let mut bomb = String::from("a: &a [\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\"]\n");
    for (name, previous) in ["b", "c", "d", "e", "f", "g", "h", "i"]
        .iter()
        .zip(["a", "b", "c", "d", "e", "f", "g", "h"])
    {
        let refs = vec![format!("*{previous}"); 9].join(",");
        writeln!(bomb, "{name}: &{name} [{refs}]").unwrap();
    }
    let started = Instant::now();
    let findings = checker::check(&bomb);
    assert!(
        findings
            .errors
            .iter()
            .any(|f| f.message.contains("not valid YAML") && f.message.contains("repetition")),
        "{findings:?}"
    );
    let mig = gpu_operator_mig_manager::layouts(&bomb).unwrap_err();
    assert!(mig.to_string().contains("repetition"), "{mig}");
    // 9^9 strings would take minutes and gigabytes; refusing takes milliseconds.
    assert!(started.elapsed().as_secs() < 10, "{:?}", started.elapsed());
}

/// The mutations are not all refused by deserialisation: most mutated specs reach the renderers
/// (else the fuzzing above would test serde alone).
#[test]
fn most_mutated_cluster_policies_reach_the_renderers() {
    use proptest::strategy::ValueTree as _;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = (any::<usize>(), prop::collection::vec(mutation(), 1..6));
    let seeds = seeds();
    let (mut parsed, mut rendered) = (0, 0);
    for _ in 0..200 {
        let (seed, mutations) = strategy.new_tree(&mut runner).unwrap().current();
        let doc = mutate(seeds[seed % seeds.len()].clone(), &mutations);
        if let Ok(spec) = serde_json::from_value::<ClusterPolicySpec>(doc) {
            parsed += 1;
            rendered += usize::from(run_every_operand(&spec) > 0);
        }
    }
    assert!(
        parsed >= 60 && rendered >= 60,
        "parsed {parsed}, rendered {rendered} of 200"
    );
}
