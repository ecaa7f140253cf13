//! Tidy checks run by the ordinary `cargo test`: every Rust file says what it owns in a `//!` header
//! and stays small enough to read in one sitting, and `ARCHITECTURE.md` names every crate.

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    /// Longest a source file may grow before it should be split.
    const MAX_LINES: usize = 500;

    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
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

    fn workspace_files() -> Vec<PathBuf> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap()
            .to_path_buf();
        let mut files = Vec::new();
        for dir in ["crates", "xtask", "e2e"] {
            rust_files(&root.join(dir), &mut files);
        }
        assert!(
            files.len() > 10,
            "found too few Rust files under {}",
            root.display()
        );
        files
    }

    #[test]
    fn every_rust_file_starts_with_a_module_header() {
        let missing: Vec<String> = workspace_files()
            .into_iter()
            .filter(|path| {
                let text = std::fs::read_to_string(path).unwrap();
                !text.trim_start().starts_with("//!")
            })
            .map(|p| p.display().to_string())
            .collect();
        assert!(
            missing.is_empty(),
            "add a `//!` line saying what the file owns to: {missing:#?}"
        );
    }

    #[test]
    fn no_rust_file_is_longer_than_the_limit() {
        let long: Vec<String> = workspace_files()
            .into_iter()
            .filter_map(|path| {
                let lines = std::fs::read_to_string(&path).unwrap().lines().count();
                (lines > MAX_LINES).then(|| format!("{} ({lines} lines)", path.display()))
            })
            .collect();
        assert!(
            long.is_empty(),
            "split these files (limit {MAX_LINES} lines): {long:#?}"
        );
    }

    /// The workspace crates' folders relative to the root (`crates/<name>`, `e2e`, `xtask`): the
    /// members of the root manifest, which lists `crates/*`, `e2e` and `xtask`.
    fn workspace_crates(root: &Path) -> Vec<String> {
        let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
        assert!(
            manifest.contains(r#"members = ["crates/*", "e2e", "xtask"]"#),
            "the workspace members changed: teach this test where the crates are"
        );
        let mut crates: Vec<String> = std::fs::read_dir(root.join("crates"))
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.join("Cargo.toml").is_file())
            .map(|path| format!("crates/{}", path.file_name().unwrap().to_string_lossy()))
            .collect();
        crates.sort();
        crates.extend(["e2e".to_owned(), "xtask".to_owned()]);
        crates
    }

    #[test]
    fn the_architecture_page_names_every_workspace_crate() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let page = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
        let crates = workspace_crates(root);
        assert!(crates.len() > 10, "found too few crates: {crates:?}");
        let missing: Vec<&String> = crates
            .iter()
            .filter(|dir| !page.contains(&format!("`{dir}`")))
            .collect();
        assert!(
            missing.is_empty(),
            "ARCHITECTURE.md does not mention these crates (write `<folder>` in its crate map, \
             with what the crate is for): {missing:#?}"
        );
    }
}
