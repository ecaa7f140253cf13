//! Tidy test of ARCHITECTURE.md's rule that a default is decided once, on its API type: the
//! string of each default listed here (read from its constant in `gpu-operator-api`) appears as a
//! literal in the workspace's Rust sources only where that constant is defined, in tests and in
//! comments. A second copy fails with its file and line: use the constant there instead.

use std::path::{Path, PathBuf};

use gpu_operator_api::spec::{HostPathsSpec, MigPartedConfigSpec, MpsConfig, ToolkitSpec};

use super::walk::{self, relative};

/// The defaults held to one copy, by the API constant that is that copy. (`HostPathsSpec`'s
/// root filesystem, `/`, is too common a string to tell a copy; the driver's install directory
/// is also the path inside the containers that mount it.)
const DEFAULTS: [(&str, &str); 4] = [
    (
        "MigPartedConfigSpec::DEFAULT_LAYOUT",
        MigPartedConfigSpec::DEFAULT_LAYOUT,
    ),
    ("MpsConfig::DEFAULT_ROOT", MpsConfig::DEFAULT_ROOT),
    (
        "ToolkitSpec::DEFAULT_INSTALL_DIR",
        ToolkitSpec::DEFAULT_INSTALL_DIR,
    ),
    (
        "HostPathsSpec::DEFAULT_KUBELET_ROOT_DIR",
        HostPathsSpec::DEFAULT_KUBELET_ROOT_DIR,
    ),
];

/// The Rust files that are not test code: under the workspace crates' and `xtask`'s `src/`,
/// without `tests` folders, `tests.rs` files and the files of `#[cfg(test)] mod name;`
/// declarations (with their folders). `e2e`, `harness` and `fuzz` are test code throughout.
fn production_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in walk::workspace_crates() {
        let src = walk::root().join(&dir).join("src");
        if src.is_dir() && !["e2e", "harness"].contains(&dir.as_str()) {
            walk::rust_files(&src, &mut files);
        }
    }
    let test_modules: Vec<PathBuf> = files.iter().flat_map(|f| test_module_paths(f)).collect();
    files.retain(|file| {
        let in_tests_folder = file.components().any(|c| c.as_os_str() == "tests");
        let is_tests_file = file.file_name().is_some_and(|n| n == "tests.rs");
        let in_test_module = test_modules
            .iter()
            .any(|module| file == &module.with_extension("rs") || file.starts_with(module));
        !in_tests_folder && !is_tests_file && !in_test_module
    });
    files
}

/// The module paths (without `.rs`) of the `#[cfg(test)] mod name;` declarations in `file`.
fn test_module_paths(file: &Path) -> Vec<PathBuf> {
    let text = std::fs::read_to_string(file).unwrap();
    let dir = match file.file_stem().and_then(|s| s.to_str()) {
        Some("lib" | "main" | "mod") => file.parent().unwrap().to_path_buf(),
        _ => file.with_extension(""),
    };
    let lines: Vec<&str> = text.lines().collect();
    lines
        .windows(2)
        .filter(|pair| pair[0].trim() == "#[cfg(test)]")
        .filter_map(|pair| {
            let declaration = pair[1].trim();
            let name = declaration
                .strip_prefix("pub mod ")
                .or_else(|| declaration.strip_prefix("mod "))?
                .strip_suffix(';')?;
            Some(dir.join(name))
        })
        .collect()
}

/// The lines of `text` outside comments and inline test modules (a `#[cfg(test)]` line followed
/// by `mod <name> {`, which by this code base's habit ends the file), with their numbers.
fn code_lines(text: &str) -> Vec<(usize, &str)> {
    let lines: Vec<&str> = text.lines().collect();
    let end = lines
        .windows(2)
        .position(|pair| {
            let next = pair[1].trim();
            pair[0].trim() == "#[cfg(test)]" && next.starts_with("mod ") && next.ends_with('{')
        })
        .unwrap_or(lines.len());
    lines[..end]
        .iter()
        .enumerate()
        .filter(|(_, line)| !line.trim_start().starts_with("//"))
        .map(|(i, line)| (i + 1, *line))
        .collect()
}

/// Where `literal` appears quoted in `text`'s code lines, as `<file>:<line>`.
fn copies(file: &str, text: &str, literal: &str) -> Vec<String> {
    let quoted = format!("\"{literal}\"");
    code_lines(text)
        .into_iter()
        .filter(|(_, line)| line.contains(&quoted))
        .map(|(n, _)| format!("{file}:{n}"))
        .collect()
}

#[test]
fn each_default_literal_has_one_copy_in_rust_on_its_api_type() {
    let files: Vec<(String, String)> = production_files()
        .iter()
        .map(|path| (relative(path), std::fs::read_to_string(path).unwrap()))
        .collect();
    let mut offenders = Vec::new();
    for (constant, literal) in DEFAULTS {
        let found: Vec<String> = files
            .iter()
            .flat_map(|(file, text)| copies(file, text, literal))
            .collect();
        let (definitions, others): (Vec<&String>, Vec<&String>) = found
            .iter()
            .partition(|at| at.starts_with("crates/gpu-operator-api/src/"));
        assert_eq!(
            definitions.len(),
            1,
            "{constant} ({literal:?}) should be defined once in gpu-operator-api: {definitions:#?}"
        );
        offenders.extend(
            others
                .iter()
                .map(|at| format!("{at}: {literal:?} ({constant})")),
        );
    }
    assert!(
        offenders.is_empty(),
        "a second copy of a default decided on its API type: use the constant instead: \
         {offenders:#?}"
    );
}

#[test]
fn copies_are_found_outside_comments_and_test_modules() {
    let text = "//! \"x\" in a header\nlet a = \"x\";\n    // \"x\" in a comment\nlet b = \"xy\";\n\
                #[cfg(test)]\nmod tests {\n    let c = \"x\";\n}\n";
    assert_eq!(copies("f.rs", text, "x"), ["f.rs:2"]);
    let files = production_files();
    let has = |path: &str| files.iter().any(|f| relative(f) == path);
    assert!(has("crates/gpu-operator-api/src/spec/mig.rs"));
    assert!(
        !has("crates/gpu-operator-node-labels/src/desired/fixtures.rs"),
        "a `#[cfg(test)] mod fixtures;` file is test code"
    );
    assert!(!has("crates/gpu-operator-node-labels/src/desired/tests.rs"));
    assert!(!has(
        "crates/gpu-operator-api/tests/clusterpolicy/schema.rs"
    ));
}
