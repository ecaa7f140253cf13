//! Tidy checks run by the ordinary `cargo test`: every Rust file says what it owns in a `//!` header
//! and stays small enough to read in one sitting, `ARCHITECTURE.md` names every crate, and test
//! fixtures stay out of production builds. ARCHITECTURE.md's other invariants are checked in
//! `invariants`, core's layering in `core_layers` and the one copy of each default in
//! `defaults`; `walk` finds the files they read.

#[cfg(test)]
mod core_layers;
#[cfg(test)]
mod defaults;
#[cfg(test)]
mod invariants;
#[cfg(test)]
mod walk;

#[cfg(test)]
mod tests {
    use super::walk::{relative, workspace_crates, workspace_files};

    /// A source file this long is printed as one to split soon.
    const WARN_LINES: usize = 500;
    /// Longest a source file may grow before it must be split.
    const MAX_LINES: usize = 700;

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
        let lengths: Vec<(String, usize)> = workspace_files()
            .into_iter()
            .map(|path| {
                let lines = std::fs::read_to_string(&path).unwrap().lines().count();
                (relative(&path), lines)
            })
            .collect();
        for (path, lines) in lengths
            .iter()
            .filter(|(_, n)| (WARN_LINES + 1..=MAX_LINES).contains(n))
        {
            println!("warning: {path} has {lines} lines (over {WARN_LINES}): split it soon");
        }
        let long: Vec<String> = lengths
            .iter()
            .filter(|(_, lines)| *lines > MAX_LINES)
            .map(|(path, lines)| format!("{path} ({lines} lines)"))
            .collect();
        assert!(
            long.is_empty(),
            "split these files (limit {MAX_LINES} lines; over {WARN_LINES} only warns): {long:#?}"
        );
    }

    #[test]
    fn the_architecture_page_names_every_workspace_crate() {
        let page = std::fs::read_to_string(super::walk::root().join("ARCHITECTURE.md")).unwrap();
        let crates = workspace_crates();
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
        let mut offenders = Vec::new();
        let mut blocks = 0;
        for path in workspace_files() {
            let text = std::fs::read_to_string(&path).unwrap();
            let relative = relative(&path);
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
        let offending: Vec<String> = workspace_crates()
            .into_iter()
            .flat_map(|dir| {
                let manifest =
                    std::fs::read_to_string(super::walk::root().join(&dir).join("Cargo.toml"))
                        .unwrap();
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
