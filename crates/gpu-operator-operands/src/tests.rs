//! The registry against what lies outside it: the crates that implement `Operand`, the chart's
//! operator environment, and hand-written lists of NVIDIA's names.

use std::{collections::BTreeSet, path::Path};

use super::*;

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// Spelled in two parts so that this file does not match itself.
const IMPLEMENTS_OPERAND: &str = concat!("Operand", " for ");

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The library names (`gpu_operator_driver`) of the workspace crates with a line of `src/` that
/// says `impl ... Operand for ...`, core aside (it defines the contract; its one operand is the
/// unit tests' second owner kind, `pipeline/test_pool.rs`).
fn crates_implementing_operand() -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for entry in std::fs::read_dir(root().join("crates")).unwrap() {
        let dir = entry.unwrap().path();
        let src = dir.join("src");
        if !src.is_dir() || dir.ends_with("gpu-operator-core") {
            continue;
        }
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        let implements = files.iter().any(|file| {
            std::fs::read_to_string(file).unwrap().lines().any(|line| {
                let line = line.trim_start();
                line.starts_with("impl") && line.contains(IMPLEMENTS_OPERAND)
            })
        });
        if implements {
            let name = dir.file_name().unwrap().to_string_lossy().replace('-', "_");
            found.insert(name);
        }
    }
    found
}

/// How many `impl ... Operand for ...` lines each crate of [`crates_implementing_operand`] has.
fn operand_impls_by_crate() -> std::collections::BTreeMap<String, usize> {
    let mut found = std::collections::BTreeMap::new();
    for name in crates_implementing_operand() {
        let mut files = Vec::new();
        rust_files(
            &root()
                .join("crates")
                .join(name.replace('_', "-"))
                .join("src"),
            &mut files,
        );
        let count = files
            .iter()
            .map(|file| {
                std::fs::read_to_string(file)
                    .unwrap()
                    .lines()
                    .filter(|line| {
                        let line = line.trim_start();
                        line.starts_with("impl") && line.contains(IMPLEMENTS_OPERAND)
                    })
                    .count()
            })
            .sum();
        found.insert(name, count);
    }
    found
}

#[test]
fn every_crate_that_implements_operand_is_registered() {
    let implementing = crates_implementing_operand();
    assert!(
        implementing.contains("gpu_operator_driver") && implementing.len() >= 10,
        "the search for Operand implementations found too little: {implementing:?}"
    );
    let registered: BTreeSet<String> = all_entries()
        .iter()
        .map(|entry| entry.type_name.split("::").next().unwrap().to_owned())
        .collect();
    let missing: Vec<&String> = implementing.difference(&registered).collect();
    assert!(
        missing.is_empty(),
        "these crates implement Operand but are not in the registry: add each to `visit_all` \
         (or the list of its owner kind, such as `visit_nvidia_driver`) in \
         crates/gpu-operator-operands/src/lib.rs (and the crate to its Cargo.toml): {missing:?}"
    );
    let impls: usize = operand_impls_by_crate().values().sum();
    assert_eq!(
        all_entries().len(),
        impls,
        "every `impl Operand` is registered once: {:#?}",
        all_entries()
    );
    // One ClusterPolicy operand per crate, but for the sandbox device plugins: one per sandbox
    // mode, of one shape, never both deployed.
    let two = ["gpu_operator_sandbox_device_plugin"];
    let crates: BTreeSet<&str> = entries()
        .iter()
        .filter_map(|entry| entry.type_name.split("::").next())
        .collect();
    assert_eq!(
        entries().len(),
        crates.len() + two.iter().filter(|c| crates.contains(*c)).count(),
        "one ClusterPolicy operand per crate (two for {two:?})"
    );
}

#[test]
fn every_owner_kind_has_its_list() {
    let owners: Vec<(&str, &str)> = all_entries()
        .iter()
        .map(|entry| (entry.owner, entry.type_name))
        .filter(|(owner, _)| *owner != "ClusterPolicy")
        .collect();
    assert_eq!(
        owners,
        [
            (
                "NvidiaDriver",
                "gpu_operator_driver::nvidia_driver::NvidiaDriverOperand"
            ),
            ("GpuCluster", "gpu_operator_dra_driver::DraDriver"),
            ("GpuCluster", "gpu_operator_dra_driver::DraValidator"),
            (
                "GpuCluster",
                "gpu_operator_dcgm_hostengine::gpu_cluster::DcgmDra"
            ),
            (
                "GpuCluster",
                "gpu_operator_dcgm_exporter::gpu_cluster::DcgmExporterDra"
            ),
        ]
    );
    assert!(entries().iter().all(|entry| entry.owner == "ClusterPolicy"));
    let all = all_entries();
    for kind in ["NvidiaDriver", "GpuCluster"] {
        let of_kind: Vec<&Entry> = all.iter().filter(|entry| entry.owner == kind).collect();
        let conditions: BTreeSet<&str> = of_kind.iter().map(|entry| entry.condition).collect();
        let names: BTreeSet<&str> = of_kind.iter().map(|entry| entry.name).collect();
        assert_eq!(
            (conditions.len(), names.len()),
            (of_kind.len(), of_kind.len()),
            "one condition and one name per operand of {kind}"
        );
    }
}

#[test]
fn names_and_conditions_are_unique() {
    let entries = entries();
    let names: BTreeSet<&str> = entries.iter().map(|entry| entry.name).collect();
    let conditions: BTreeSet<&str> = entries.iter().map(|entry| entry.condition).collect();
    assert_eq!(names.len(), entries.len(), "{entries:#?}");
    assert_eq!(conditions.len(), entries.len(), "{entries:#?}");
}

#[test]
fn the_overall_ready_waits_for_every_container_operand_in_nvidias_order() {
    // By hand: the operand conditions, in the order the overall status names them;
    // `SandboxWorkloadsReady` only reports. The sandbox operands count as NVIDIA's states do (in
    // NVIDIA's order): each says `Disabled` (ready) without sandbox workloads (the plugins and the
    // CC manager also outside their mode), so the container stack's `Ready` holds.
    assert_eq!(
        ready_conditions(),
        [
            "DevicePluginReady",
            "ValidatorReady",
            "DriverReady",
            "ToolkitReady",
            "DCGMReady",
            "DCGMExporterReady",
            "MIGManagerReady",
            "NodeStatusExporterReady",
            "GFDReady",
            "VGPUManagerReady",
            "VGPUDeviceManagerReady",
            "SandboxValidatorReady",
            "VfioManagerReady",
            "SandboxDevicePluginReady",
            "KataSandboxDevicePluginReady",
            "CCManagerReady",
        ]
    );
}

#[test]
fn the_image_variables_are_the_ones_nvidias_operator_reads() {
    // By hand, from NVIDIA's operator (its Deployment's `*_IMAGE` variables).
    let nvidia = BTreeSet::from([
        "DRIVER_IMAGE",
        "DRIVER_MANAGER_IMAGE",
        "CONTAINER_TOOLKIT_IMAGE",
        "DEVICE_PLUGIN_IMAGE",
        "DCGM_IMAGE",
        "DCGM_EXPORTER_IMAGE",
        "GFD_IMAGE",
        "VALIDATOR_IMAGE",
        "MIG_MANAGER_IMAGE",
        "GDS_IMAGE",
        "GDRCOPY_IMAGE",
        "VFIO_MANAGER_IMAGE",
        "SANDBOX_DEVICE_PLUGIN_IMAGE",
        "VGPU_MANAGER_IMAGE",
        "VGPU_DEVICE_MANAGER_IMAGE",
        "KATA_MANAGER_IMAGE",
        "KATA_SANDBOX_DEVICE_PLUGIN_IMAGE",
        "CC_MANAGER_IMAGE",
        "CUDA_BASE_IMAGE",
        // v26.7's GPUCluster: the DRA driver (`internal/state/dra_driver.go`).
        "DRA_DRIVER_IMAGE",
    ]);
    // Ours alone: the operator's own image, which the GPU health agent runs.
    let ours = ["OPERATOR_IMAGE"];
    let mut vars = image_vars();
    assert_eq!(
        vars.len(),
        nvidia.len() + ours.len(),
        "each variable once: {vars:?}"
    );
    vars.retain(|v| !ours.contains(v));
    assert_eq!(vars.into_iter().collect::<BTreeSet<_>>(), nvidia);
}

/// The chart's operator image variables and the values section each is set from, read from the
/// `gpu-operator.imageEnv` template: its lines `(list "<VAR>" ... $v.<section> ...)`.
fn chart_image_env() -> Vec<(String, String)> {
    let helpers =
        std::fs::read_to_string(root().join("charts/gpu-operator/templates/_helpers.tpl")).unwrap();
    let start = helpers
        .find(r#"define "gpu-operator.imageEnv""#)
        .expect("the chart's gpu-operator.imageEnv template");
    let end = start + helpers[start..].find("{{- end -}}").unwrap();
    helpers[start..end]
        .lines()
        .filter_map(|line| {
            let rest = line.trim().strip_prefix("(list \"")?;
            let (var, rest) = rest.split_once('"')?;
            let section = rest.split_once("$v.")?.1;
            let section: String = section
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '.')
                .collect();
            Some((var.to_owned(), section))
        })
        .collect()
}

#[test]
fn the_chart_sets_the_image_variables_of_the_registry() {
    let chart = chart_image_env();
    assert!(
        chart.contains(&(
            "DRIVER_MANAGER_IMAGE".to_owned(),
            "driver.manager".to_owned()
        )),
        "the chart's imageEnv template was not read: {chart:?}"
    );
    let registry: Vec<(String, String)> = image_envs()
        .iter()
        .filter_map(|image| Some((image.var.to_owned(), image.chart_values?.to_owned())))
        .collect();
    let only_chart: Vec<&(String, String)> =
        chart.iter().filter(|env| !registry.contains(env)).collect();
    let only_registry: Vec<&(String, String)> =
        registry.iter().filter(|env| !chart.contains(env)).collect();
    assert!(
        only_chart.is_empty() && only_registry.is_empty(),
        "the chart's operator image variables (charts/gpu-operator/templates/_helpers.tpl, \
         gpu-operator.imageEnv) and the operands' `IMAGES` disagree: only in the chart \
         {only_chart:?}, only in the registry {only_registry:?}"
    );
}
