//! Tidy tests of ARCHITECTURE.md's invariants that no compiler checks: no operand crate depends
//! on another, no `#[path]` include, no `*_tests.rs` sibling, no raw spec section in an operand's
//! `Input` (nor in a struct of its crate the `Input` holds), and a recipe for a new operand of at
//! most ten steps.

use std::collections::{BTreeMap, BTreeSet};

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

/// The top-level structs of a crate's `src/` (a `pub struct Name {` line at the start of a line,
/// generics and visibility allowed), each with its field lines and where it is.
fn structs(dir: &str) -> BTreeMap<String, (String, Vec<String>)> {
    let mut files = Vec::new();
    walk::rust_files(&walk::root().join(dir).join("src"), &mut files);
    let mut found = BTreeMap::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let mut current: Option<(String, Vec<String>)> = None;
        for line in text.lines() {
            if let Some(name) = struct_name(line) {
                current = Some((name, Vec::new()));
            } else if line.starts_with('}') {
                if let Some((name, fields)) = current.take() {
                    found.insert(name, (relative(&file), fields));
                }
            } else if let Some((_, fields)) = current.as_mut() {
                fields.push(line.to_owned());
            }
        }
    }
    found
}

/// The name of the struct a line opens with a braced body (`pub struct Input {`,
/// `pub(crate) struct Pull<'a> {`).
fn struct_name(line: &str) -> Option<String> {
    let rest = line
        .strip_prefix("pub struct ")
        .or_else(|| line.strip_prefix("pub(crate) struct "))
        .or_else(|| line.strip_prefix("struct "))?;
    if !line.trim_end().ends_with('{') {
        return None;
    }
    let name: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty()).then_some(name)
}

/// The fields of an operand's `Input`, and of every struct of the operand crate it holds (at any
/// depth), that hold a spec section type (a type whose name ends in `Spec`, such as
/// `DevicePluginSpec`), as `<file>: <struct>.<field line>`.
fn raw_spec_fields(dir: &str) -> Vec<String> {
    let structs = structs(dir);
    assert!(
        structs.contains_key("Input"),
        "{dir} implements Operand but no `pub struct Input {{` was found: teach this test where \
         its Input is"
    );
    raw_spec_fields_of(&structs)
}

/// [`raw_spec_fields`] over `structs`, from `Input`.
fn raw_spec_fields_of(structs: &BTreeMap<String, (String, Vec<String>)>) -> Vec<String> {
    let mut queue = vec!["Input".to_owned()];
    let mut seen = BTreeSet::new();
    let mut found = Vec::new();
    while let Some(name) = queue.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        let Some((file, fields)) = structs.get(&name) else {
            continue;
        };
        for line in fields {
            if holds_spec_type(line) {
                found.push(format!("{file}: {name}.{}", line.trim()));
            }
            queue.extend(
                field_types(line)
                    .filter(|word| structs.contains_key(*word))
                    .map(str::to_owned),
            );
        }
    }
    found
}

/// The type names a field line mentions (`pub gds: Option<Sidecar>,` gives `Option` and
/// `Sidecar`); none for comments and attributes.
fn field_types(line: &str) -> impl Iterator<Item = &str> {
    let line = line.trim();
    let ty = if line.starts_with("//") || line.starts_with('#') {
        ""
    } else {
        line.split_once(':').map_or("", |(_, ty)| ty)
    };
    ty.split(|c: char| !c.is_alphanumeric() && c != '_')
        .filter(|word| word.starts_with(|c: char| c.is_uppercase()))
}

/// Whether a field line's type names a type that ends in `Spec` (`ClusterPolicySpec`,
/// `Option<GdsSpec>`, …).
fn holds_spec_type(line: &str) -> bool {
    field_types(line).any(|word| word.ends_with("Spec"))
}

#[test]
fn no_operand_input_holds_a_raw_spec_section() {
    let found: Vec<String> = operand_crates()
        .iter()
        .flat_map(|dir| raw_spec_fields(dir))
        .collect();
    assert!(
        found.is_empty(),
        "an operand's Input (or a struct of its crate that the Input holds) holds a raw spec \
         section: resolve what rendering needs in validate.rs (core's build::component for a \
         section's image and container settings) and keep only that: {found:#?}"
    );
    assert!(holds_spec_type("    pub spec: ClusterPolicySpec,"));
    assert!(holds_spec_type("    pub gds: Option<Box<GdsSpec>>,"));
    assert!(!holds_spec_type("    pub image: String,"));
    assert!(!holds_spec_type(
        "    /// The section: DevicePluginSpec resolved."
    ));
    assert!(!holds_spec_type("    pub specific: Inspect,"));
    assert_eq!(struct_name("pub struct Input {").as_deref(), Some("Input"));
    assert_eq!(
        struct_name("pub(crate) struct Pull<'a> {").as_deref(),
        Some("Pull")
    );
    assert_eq!(struct_name("pub struct Unit;"), None);
    assert_eq!(
        field_types("    pub gds: Option<Sidecar>,").collect::<Vec<_>>(),
        ["Option", "Sidecar"]
    );
    // A positive control: a raw section two structs deep is found, one the Input does not hold
    // is not.
    let fields = |lines: &[&str]| lines.iter().map(|l| (*l).to_owned()).collect();
    let synthetic = BTreeMap::from([
        (
            "Input".to_owned(),
            ("a.rs".to_owned(), fields(&["    pub held: Vec<Held>,"])),
        ),
        (
            "Held".to_owned(),
            (
                "b.rs".to_owned(),
                fields(&["    pub raw: Option<GdsSpec>,"]),
            ),
        ),
        (
            "Other".to_owned(),
            ("c.rs".to_owned(), fields(&["    pub raw: DriverSpec,"])),
        ),
    ]);
    assert_eq!(
        raw_spec_fields_of(&synthetic),
        ["b.rs: Held.pub raw: Option<GdsSpec>,"]
    );
    assert!(
        structs("crates/gpu-operator-driver")["Input"]
            .1
            .iter()
            .flat_map(|line| field_types(line))
            .any(|ty| ty == "Pool"),
        "the driver's Input holds its pools, a struct of its crate: the files were not read"
    );
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
