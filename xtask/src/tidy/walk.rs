//! What the tidy tests walk: the repository root, its Rust files, the workspace crates, the
//! operand crates and the dependencies a manifest names.

use std::path::{Path, PathBuf};

/// The repository root (the parent of `xtask`).
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

/// `path` relative to the repository root, as text.
pub fn relative(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

/// Every `.rs` file under `dir`, skipping `target` folders.
pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            if !path.ends_with("target") {
                rust_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every Rust file of the workspace, the fuzz workspace included.
pub fn workspace_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in ["crates", "xtask", "e2e", "harness", "fuzz"] {
        rust_files(&root().join(dir), &mut files);
    }
    assert!(
        files.len() > 10,
        "found too few Rust files under {}",
        root().display()
    );
    files
}

/// The workspace crates' folders relative to the root (`crates/<name>`, `e2e`, `harness`,
/// `xtask`): the members of the root manifest, which lists `crates/*`, `e2e`, `harness` and
/// `xtask`.
pub fn workspace_crates() -> Vec<String> {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    assert!(
        manifest.contains(r#"members = ["crates/*", "e2e", "harness", "xtask"]"#),
        "the workspace members changed: teach this test where the crates are"
    );
    let mut crates: Vec<String> = std::fs::read_dir(root().join("crates"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.join("Cargo.toml").is_file())
        .map(|path| format!("crates/{}", path.file_name().unwrap().to_string_lossy()))
        .collect();
    crates.sort();
    crates.extend(["e2e".to_owned(), "harness".to_owned(), "xtask".to_owned()]);
    crates
}

/// Spelled in two parts so that this file does not match itself.
const IMPLEMENTS_OPERAND: &str = concat!("Operand", " for ");

/// The crates (`crates/<name>`) whose library implements the operand contract: a line of
/// `src/` that says `impl ... Operand for ...`.
pub fn operand_crates() -> Vec<String> {
    workspace_crates()
        .into_iter()
        // Core defines the contract; the one operand it implements is the unit tests' second owner
        // kind (`pipeline/test_pool.rs`).
        .filter(|dir| dir.starts_with("crates/") && dir != "crates/gpu-operator-core")
        .filter(|dir| {
            let mut files = Vec::new();
            rust_files(&root().join(dir).join("src"), &mut files);
            files.iter().any(|file| {
                std::fs::read_to_string(file).unwrap().lines().any(|line| {
                    let line = line.trim_start();
                    line.starts_with("impl") && line.contains(IMPLEMENTS_OPERAND)
                })
            })
        })
        .collect()
}

/// The package names a manifest depends on, in every dependency section (`[dependencies]`,
/// `[dev-dependencies]`, `[build-dependencies]`, target-specific ones), with the section.
pub fn dependencies(manifest: &str) -> Vec<(String, String)> {
    let mut section = String::new();
    let mut found = Vec::new();
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            section = line.to_owned();
        } else if section.ends_with("dependencies]")
            && let Some((name, _)) = line.split_once('=')
        {
            let name = name.trim().trim_end_matches(".workspace").to_owned();
            if !name.is_empty() && !name.starts_with('#') {
                found.push((section.clone(), name));
            }
        }
    }
    found
}
