//! Either validator image works: every container the operator starts from the validator image
//! (the operands' barrier init containers, the `nvidia-operator-validator` DaemonSet, the node
//! status exporter), for every example ClusterPolicy on every node profile, runs only commands
//! and relies only on environment that NVIDIA's image and ours both provide. The two contracts
//! are `validator_images.yaml` (NVIDIA's: hand-written facts; ours: checked against the
//! Dockerfile and against our validator's real argument parser). The pods the validator creates
//! (its CUDA and device plugin workload pods) are held to the same contract.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod contract;
mod shell;
mod workload_pods;

use std::{collections::BTreeSet, path::Path};

use contract::{Contract, Image};
use gpu_operator_api::ClusterPolicy;
use gpu_operator_core::{contract::Operand, fixtures};
use serde_json::Value;

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// Every DaemonSet of every operand of the registry, per `<example>-<profile>`.
fn rendered() -> Vec<(String, Vec<Value>)> {
    struct Every(Vec<Vec<(String, Vec<Value>)>>);
    impl gpu_operator_operands::Visit for Every {
        fn operand<O: Operand<Owner = ClusterPolicy>>(&mut self) {
            // NVIDIA's default is off, and so is most examples': every example with it on too.
            let exporter_on = O::SECTION == "nodeStatusExporter";
            self.0.push(daemonsets_of::<O>(exporter_on));
        }
    }
    let mut every = Every(Vec::new());
    gpu_operator_operands::visit_all(&mut every);
    let all = every.0;
    let mut by_case: Vec<(String, Vec<Value>)> = Vec::new();
    for operand in all {
        for (case, daemonsets) in operand {
            match by_case.iter_mut().find(|(c, _)| *c == case) {
                Some((_, list)) => list.extend(daemonsets),
                None => by_case.push((case, daemonsets)),
            }
        }
    }
    by_case
}

/// Operand `O`'s DaemonSets for every example on every profile (none where it is disabled),
/// with the node status exporter switched on first when `exporter_on`.
fn daemonsets_of<O: Operand<Owner = ClusterPolicy>>(
    exporter_on: bool,
) -> Vec<(String, Vec<Value>)> {
    let config_maps = fixtures::example_config_maps(root()).unwrap();
    let lookup = |name: &str| {
        config_maps
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(name))
            .map(|c| std::sync::Arc::new(c.clone()))
    };
    let mut out = Vec::new();
    for (example, mut spec) in fixtures::examples(root()).unwrap() {
        if exporter_on {
            spec.node_status_exporter.enabled = Some(true);
        }
        for profile in fixtures::profiles() {
            let cluster = gpu_operator_core::contract::Cluster {
                namespace: "gpu-operator",
                facts: &profile.facts,
                image_env: &fixtures::image_env,
                config_maps: &lookup,
                policy: None,
                server: gpu_operator_core::cache::server_facts::ServerFacts::unknown(),
            };
            let daemonsets = match O::validate(&spec, &cluster).unwrap() {
                Some(input) => serde_json::to_value(&O::render(&input).daemonsets).unwrap(),
                None => Value::Array(Vec::new()),
            };
            let Value::Array(daemonsets) = daemonsets else {
                panic!("DaemonSets serialise as a list")
            };
            out.push((format!("{example}-{}", profile.name), daemonsets));
        }
    }
    out
}

/// The validator DaemonSet among one case's DaemonSets.
fn validator_of(daemonsets: &[Value]) -> &Value {
    daemonsets
        .iter()
        .find(|d| d["metadata"]["name"] == gpu_operator_validator_operand::DAEMONSET)
        .expect("the validator DaemonSet is rendered for every example")
}

/// The containers started from the validator image in one case's DaemonSets: those with the
/// image of the validator DaemonSet, and the node status exporter (NVIDIA ships it in that image).
fn validator_image_containers(daemonsets: &[Value]) -> Vec<(String, Value)> {
    let validator = validator_of(daemonsets);
    let image = validator["spec"]["template"]["spec"]["containers"][0]["image"].clone();
    let mut out = Vec::new();
    for ds in daemonsets {
        let ds_name = ds["metadata"]["name"].as_str().unwrap_or_default();
        let pod = &ds["spec"]["template"]["spec"];
        for list in ["initContainers", "containers"] {
            for c in pod[list].as_array().into_iter().flatten() {
                if c["image"] == image || ds_name == "nvidia-node-status-exporter" {
                    out.push((
                        format!("{ds_name}/{}", c["name"].as_str().unwrap()),
                        c.clone(),
                    ));
                }
            }
        }
    }
    out
}

#[test]
fn every_validator_image_container_of_every_example_runs_on_both_images() {
    let contract = Contract::load();
    let mut checked = BTreeSet::new();
    let mut problems = Vec::new();
    for (case, daemonsets) in rendered() {
        for (name, container) in validator_image_containers(&daemonsets) {
            for image in [Image::Nvidia, Image::Ours] {
                for problem in contract.check(image, &container) {
                    problems.push(format!("{case}: {name} on {image:?}'s image: {problem}"));
                }
            }
            checked.insert(name);
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // The walk reached every kind of validator-image container the issue names.
    for expected in [
        "nvidia-container-toolkit-daemonset/driver-validation",
        "nvidia-device-plugin-daemonset/toolkit-validation",
        "gpu-feature-discovery/toolkit-validation",
        "nvidia-dcgm-exporter/toolkit-validation",
        "nvidia-operator-validator/driver-validation",
        "nvidia-operator-validator/toolkit-validation",
        "nvidia-operator-validator/cuda-validation",
        "nvidia-operator-validator/plugin-validation",
        "nvidia-operator-validator/nvidia-operator-validator",
        "nvidia-node-status-exporter/nvidia-node-status-exporter",
    ] {
        assert!(
            checked.contains(expected),
            "{expected} not walked: {checked:?}"
        );
    }
}

/// The validator DaemonSet of each case.
fn validator_daemonsets() -> Vec<(String, Value)> {
    rendered()
        .into_iter()
        .map(|(case, daemonsets)| {
            let validator = validator_of(&daemonsets).clone();
            (case, validator)
        })
        .collect()
}

/// What the workload pods of every case need that `image` lacks under `contract`; and how many
/// workload pods were checked.
fn workload_pod_problems(contract: &Contract, image: Image) -> (Vec<String>, usize) {
    let mut problems = Vec::new();
    let mut checked = 0;
    for (case, validator) in validator_daemonsets() {
        let pod = &validator["spec"]["template"]["spec"];
        for name in ["cuda-validation", "plugin-validation"] {
            let container = pod["initContainers"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c["name"] == name)
                .unwrap_or_else(|| panic!("{case}: the validator has no {name}"));
            match workload_pods::workload_container(name, container) {
                Ok(workload) => {
                    checked += 1;
                    for problem in contract.check(image, &workload) {
                        problems.push(format!("{case}: {name}'s workload pod: {problem}"));
                    }
                }
                Err(why) => problems.push(format!("{case}: {why}")),
            }
        }
    }
    (problems, checked)
}

/// Whichever validator image a ClusterPolicy names, the workload pods the validator starts from
/// it (`VALIDATOR_IMAGE`, the default of `CUDA_VALIDATOR_IMAGE`) run a command that image has:
/// ours answers to NVIDIA's `vectorAdd`.
#[test]
fn every_workload_pod_the_validator_creates_runs_on_both_images() {
    let contract = Contract::load();
    for image in [Image::Nvidia, Image::Ours] {
        let (problems, checked) = workload_pod_problems(&contract, image);
        assert!(problems.is_empty(), "{}", problems.join("\n"));
        assert!(checked >= 2 * fixtures::profiles().len(), "{checked}");
    }
    // Positive control: an image without `vectorAdd` fails every workload pod.
    let broken = Contract::load().without_executable(Image::Ours, "vectorAdd");
    let (problems, checked) = workload_pod_problems(&broken, Image::Ours);
    assert_eq!(problems.len(), checked, "{problems:#?}");
    assert!(
        problems[0].ends_with("runs `vectorAdd`, which the image does not have"),
        "{problems:#?}"
    );
}

/// The checker itself can fail: what earlier releases rendered, and env only ours reads, are
/// refused for NVIDIA's image; a component our parser rejects is refused for ours.
#[test]
fn the_contract_refuses_what_an_image_does_not_answer() {
    let contract = Contract::load();
    let old_barrier = serde_json::json!({
        "name": "toolkit-validation",
        "command": ["gpu-operator-validator"],
        "args": ["wait", "toolkit"],
    });
    assert!(!contract.check(Image::Nvidia, &old_barrier).is_empty());
    assert!(
        contract.check(Image::Ours, &old_barrier).is_empty(),
        "ours has that subcommand"
    );
    let old_main = serde_json::json!({
        "name": "nvidia-operator-validator",
        "command": ["nvidia-validator"],
        "args": ["idle"],
    });
    assert!(!contract.check(Image::Nvidia, &old_main).is_empty());
    let taint = serde_json::json!({
        "name": "driver-validation",
        "command": ["nvidia-validator"],
        "env": [{"name": "COMPONENT", "value": "driver"}, {"name": "LIFT_STARTUP_TAINT", "value": "true"}],
    });
    let refused = contract.check(Image::Nvidia, &taint);
    assert!(
        refused.iter().any(|p| p.contains("LIFT_STARTUP_TAINT")),
        "{refused:?}"
    );
    assert!(contract.check(Image::Ours, &taint).is_empty());
    let unknown = serde_json::json!({
        "name": "x",
        "command": ["nvidia-validator"],
        "env": [{"name": "COMPONENT", "value": "mofed"}],
    });
    assert!(contract.check(Image::Nvidia, &unknown).is_empty());
    let refused = contract.check(Image::Ours, &unknown);
    assert!(refused.iter().any(|p| p.contains("mofed")), "{refused:?}");
    let ignored = serde_json::json!({
        "name": "x",
        "command": ["nvidia-validator"],
        "env": [{"name": "COMPONENT", "value": "driver"}, {"name": "NOT_READ_BY_ANYONE", "value": "1"}],
    });
    assert!(!contract.check(Image::Ours, &ignored).is_empty());
    let script = serde_json::json!({
        "name": "x",
        "command": ["sh", "-c"],
        "args": ["until [ -f /x ]; do cat /y | grep z; sleep 1; done"],
    });
    let refused = contract.check(Image::Nvidia, &script);
    assert!(refused.iter().any(|p| p.contains("`cat`")), "{refused:?}");
    assert!(refused.iter().any(|p| p.contains("`grep`")), "{refused:?}");
}

/// Our half of the table is true of the image we build: every executable it lists is installed
/// by the Dockerfile.
#[test]
fn our_images_executables_are_installed_by_the_dockerfile() {
    let contract = Contract::load();
    let dockerfile = std::fs::read_to_string(root().join("Dockerfile")).unwrap();
    let installed = contract::dockerfile_executables(&dockerfile);
    for name in &contract.image(Image::Ours).executables {
        assert!(
            installed.contains(name),
            "{name} is not installed by the Dockerfile: {installed:?}"
        );
    }
    assert!(installed.contains("nvidia-validator"), "{installed:?}");
}
