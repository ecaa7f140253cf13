//! Tidy tests of ARCHITECTURE.md's invariants that no compiler checks: no operand crate depends
//! on another, no `#[path]` include, no `*_tests.rs` sibling, no new raw spec section in an
//! operand's `Input`, and a recipe for a new operand of at most ten steps.

use super::walk::{self, dependencies, operand_crates, relative, workspace_files};

#[test]
fn the_operand_crates_are_found() {
    let operands = operand_crates();
    // A hand-written oracle of two operands, so that a broken search cannot pass the tests below
    // by finding nothing.
    for known in [
        "crates/gpu-operator-driver",
        "crates/gpu-operator-device-plugin",
    ] {
        assert!(
            operands.iter().any(|dir| dir == known),
            "{known} implements Operand but was not found: {operands:?}"
        );
    }
    assert!(
        !operands.iter().any(|dir| dir == "crates/gpu-operator-core"),
        "core defines the contract; its test kind's operand is no operand crate"
    );
}

#[test]
fn no_operand_crate_depends_on_another_operand_crate() {
    let operands = operand_crates();
    let packages: Vec<&str> = operands
        .iter()
        .map(|dir| dir.trim_start_matches("crates/"))
        .collect();
    let mut offenders = Vec::new();
    for dir in &operands {
        let manifest = std::fs::read_to_string(walk::root().join(dir).join("Cargo.toml")).unwrap();
        for (section, name) in dependencies(&manifest) {
            if packages.contains(&name.as_str()) {
                offenders.push(format!("{dir}/Cargo.toml {section}: {name}"));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "an operand crate depends on another operand crate: move what they share into core \
         (operand-agnostic) or a library crate such as gpu-operator-plugin-config: {offenders:#?}"
    );
    let example = "[dependencies]\na.workspace = true\nb = { path = \"../b\" }\n\
                   [dev-dependencies]\nc = \"1\"\n[features]\nd = []\n";
    assert_eq!(
        dependencies(example),
        [
            ("[dependencies]".to_owned(), "a".to_owned()),
            ("[dependencies]".to_owned(), "b".to_owned()),
            ("[dev-dependencies]".to_owned(), "c".to_owned()),
        ]
    );
}

/// Spelled in two parts so that this file does not match itself.
const PATH_ATTRIBUTE: &str = concat!("#[", "path");

#[test]
fn no_rust_file_includes_another_by_path() {
    let offenders: Vec<String> = workspace_files()
        .into_iter()
        .flat_map(|path| {
            let text = std::fs::read_to_string(&path).unwrap();
            let relative = relative(&path);
            text.lines()
                .enumerate()
                .filter(|(_, line)| line.trim_start().starts_with(PATH_ATTRIBUTE))
                .map(|(i, _)| format!("{relative}:{}", i + 1))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        offenders.is_empty(),
        "no `#[path]` includes: put shared test support in the crate's library, unit tests in \
         `<module>/tests.rs`: {offenders:#?}"
    );
}

#[test]
fn no_tests_sibling_files() {
    let found: Vec<String> = workspace_files()
        .iter()
        .filter(|path| {
            path.file_name()
                .is_some_and(|name| name.to_string_lossy().ends_with("_tests.rs"))
        })
        .map(|path| relative(path))
        .collect();
    assert!(
        found.is_empty(),
        "unit tests go in their module (`mod tests`) or in `<module>/tests.rs` (a folder \
         `<module>/tests/` for its parts), not in a `*_tests.rs` sibling: {found:#?}"
    );
}

/// The fields of an operand's `Input` that hold a spec section type (a type whose name ends in
/// `Spec`, such as `DevicePluginSpec`), as `<crate>: <field line>`.
fn raw_spec_fields(dir: &str) -> Vec<String> {
    let mut files = Vec::new();
    walk::rust_files(&walk::root().join(dir).join("src"), &mut files);
    let mut found = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let mut inside = false;
        for line in text.lines() {
            if line.starts_with("pub struct Input {") {
                inside = true;
            } else if inside && line.starts_with('}') {
                inside = false;
            } else if inside && holds_spec_type(line) {
                found.push(format!("{dir}: {}", line.trim()));
            }
        }
    }
    found
}

/// Whether a field line's type names a type that ends in `Spec` (`ClusterPolicySpec`,
/// `Option<GdsSpec>`, …).
fn holds_spec_type(line: &str) -> bool {
    let line = line.trim();
    if line.starts_with("//") {
        return false;
    }
    let Some((_, ty)) = line.split_once(':') else {
        return false;
    };
    ty.split(|c: char| !c.is_alphanumeric() && c != '_')
        .any(|word| word.ends_with("Spec") && word.starts_with(|c: char| c.is_uppercase()))
}

/// The operand `Input` fields that held a raw spec section when this test was written. Giving
/// every `Input` resolved values only is issue 31's item 4; until then this test fails only for a
/// new one, and for one that is gone but still listed (so the list only shrinks).
const KNOWN_RAW_SECTIONS: [&str; 11] = [
    "crates/gpu-operator-dcgm-exporter: pub exporter: DcgmExporterSpec,",
    "crates/gpu-operator-dcgm-hostengine: pub dcgm: DcgmSpec,",
    "crates/gpu-operator-device-plugin: pub section: DevicePluginSpec,",
    "crates/gpu-operator-driver: pub driver: DriverSpec,",
    "crates/gpu-operator-driver: pub gds: Option<GdsSpec>,",
    "crates/gpu-operator-driver: pub gdrcopy: Option<GdrCopySpec>,",
    "crates/gpu-operator-gfd: pub section: GfdSpec,",
    "crates/gpu-operator-mig-manager: pub section: MigManagerSpec,",
    "crates/gpu-operator-node-status-exporter: pub section: NodeStatusExporterSpec,",
    "crates/gpu-operator-toolkit: pub section: ToolkitSpec,",
    "crates/gpu-operator-validator-operand: pub validator: ValidatorSpec,",
];

#[test]
fn no_new_operand_input_holds_a_raw_spec_section() {
    let found: Vec<String> = operand_crates()
        .iter()
        .flat_map(|dir| raw_spec_fields(dir))
        .collect();
    let new: Vec<&String> = found
        .iter()
        .filter(|field| !KNOWN_RAW_SECTIONS.contains(&field.as_str()))
        .collect();
    assert!(
        new.is_empty(),
        "an operand's Input holds a raw spec section: resolve what rendering needs in \
         validate.rs and keep only that in the Input: {new:#?}"
    );
    let gone: Vec<&&str> = KNOWN_RAW_SECTIONS
        .iter()
        .filter(|known| !found.iter().any(|field| field == *known))
        .collect();
    assert!(
        gone.is_empty(),
        "resolved (or renamed): take these off KNOWN_RAW_SECTIONS: {gone:#?}"
    );
    assert!(holds_spec_type("    pub spec: ClusterPolicySpec,"));
    assert!(holds_spec_type("    pub gds: Option<Box<GdsSpec>>,"));
    assert!(!holds_spec_type("    pub image: String,"));
    assert!(!holds_spec_type(
        "    /// The section: DevicePluginSpec resolved."
    ));
    assert!(!holds_spec_type("    pub specific: Inspect,"));
}

/// Most steps the recipe for a new operand may take.
const MAX_RECIPE_STEPS: usize = 10;

#[test]
fn the_recipe_for_a_new_operand_has_at_most_ten_steps() {
    let page = std::fs::read_to_string(walk::root().join("ARCHITECTURE.md")).unwrap();
    let section = page
        .split("\n## ")
        .find(|section| section.starts_with("Adding an operand"))
        .expect("ARCHITECTURE.md has a section \"Adding an operand\"");
    let steps: Vec<&str> = section
        .lines()
        .filter(|line| {
            line.split_once(". ")
                .is_some_and(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
        })
        .collect();
    assert!(
        (1..=MAX_RECIPE_STEPS).contains(&steps.len()),
        "the recipe for a new operand has {} steps (at most {MAX_RECIPE_STEPS}): derive what a \
         step keeps by hand from the registry (crates/gpu-operator-operands) instead: {steps:#?}",
        steps.len()
    );
    assert!(
        section.contains("visit_all"),
        "the recipe no longer names the registry's `visit_all`"
    );
}
