//! Tidy checks run by the ordinary `cargo test`: every Rust file says what it owns in a `//!` header
//! and stays small enough to read in one sitting, `ARCHITECTURE.md` names every crate, and test
//! fixtures stay out of production builds.

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
        for dir in ["crates", "xtask", "e2e", "harness", "fuzz"] {
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

    /// The workspace crates' folders relative to the root (`crates/<name>`, `e2e`, `harness`,
    /// `xtask`): the members of the root manifest, which lists `crates/*`, `e2e`, `harness` and
    /// `xtask`.
    fn workspace_crates(root: &Path) -> Vec<String> {
        let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
        assert!(
            manifest.contains(r#"members = ["crates/*", "e2e", "harness", "xtask"]"#),
            "the workspace members changed: teach this test where the crates are"
        );
        let mut crates: Vec<String> = std::fs::read_dir(root.join("crates"))
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.join("Cargo.toml").is_file())
            .map(|path| format!("crates/{}", path.file_name().unwrap().to_string_lossy()))
            .collect();
        crates.sort();
        crates.extend(["e2e".to_owned(), "harness".to_owned(), "xtask".to_owned()]);
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

    /// The one crate that may hold `unsafe` code (the workspace denies it; the CUDA workload has to
    /// launch a kernel through the driver API).
    const UNSAFE_CRATE: &str = "crates/gpu-operator-cuda-workload/";
    /// Spelled in two parts so that this file does not match itself.
    const ALLOW_UNSAFE: &str = concat!("allow(", "unsafe_code)");
    const UNSAFE_BLOCK: &str = concat!("unsafe", " {");

    #[test]
    fn unsafe_code_is_allowed_in_the_cuda_workload_alone_and_each_block_says_why() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let mut offenders = Vec::new();
        let mut blocks = 0;
        for path in workspace_files() {
            let text = std::fs::read_to_string(&path).unwrap();
            let relative = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let allowed = relative.starts_with(UNSAFE_CRATE);
            if text.contains(ALLOW_UNSAFE) && !allowed {
                offenders.push(format!("{relative}: allows unsafe code"));
            }
            let lines: Vec<&str> = text.lines().collect();
            for (i, line) in lines.iter().enumerate() {
                if !line.contains(UNSAFE_BLOCK) || line.trim_start().starts_with("//") {
                    continue;
                }
                blocks += usize::from(allowed);
                let justified = lines[..i]
                    .iter()
                    .rev()
                    .take_while(|l| l.trim_start().starts_with("//"))
                    .any(|l| l.contains("SAFETY:"));
                if !justified {
                    offenders.push(format!(
                        "{relative}:{}: an unsafe block without a `// SAFETY:` comment above it",
                        i + 1
                    ));
                }
            }
        }
        assert!(
            blocks > 0,
            "found no unsafe block under {UNSAFE_CRATE}: is this test still needed?"
        );
        assert!(offenders.is_empty(), "{offenders:#?}");
    }

    /// The `[dependencies]` lines of a manifest that turn on a `testing` feature.
    fn production_dependencies_with_testing(manifest: &str) -> Vec<String> {
        let mut section = "";
        let mut found = Vec::new();
        for line in manifest.lines() {
            let line = line.trim();
            if line.starts_with('[') {
                section = line;
            } else if section == "[dependencies]" && line.contains("\"testing\"") {
                found.push(line.to_owned());
            }
        }
        found
    }

    #[test]
    fn no_production_dependency_turns_on_a_testing_feature() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let offending: Vec<String> = workspace_crates(root)
            .into_iter()
            .flat_map(|dir| {
                let manifest = std::fs::read_to_string(root.join(&dir).join("Cargo.toml")).unwrap();
                production_dependencies_with_testing(&manifest)
                    .into_iter()
                    .map(move |line| format!("{dir}/Cargo.toml: {line}"))
            })
            .collect();
        assert!(
            offending.is_empty(),
            "test fixtures would be compiled into the product: turn `testing` on under \
             [dev-dependencies] only: {offending:#?}"
        );
        let example = "[dependencies]\na = { path = \"a\", features = [\"testing\"] }\n\
                       [dev-dependencies]\nb = { path = \"b\", features = [\"testing\"] }\n";
        assert_eq!(
            production_dependencies_with_testing(example),
            [r#"a = { path = "a", features = ["testing"] }"#]
        );
    }
}
