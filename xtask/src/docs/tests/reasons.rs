//! The book names every reason the operator writes: the reasons are read from the sources of the
//! workspace's crates (outside tests) wherever a condition or Event is made with a literal
//! reason, and each must appear, in backticks, on the troubleshooting page or the generated
//! reasons page.

use std::path::Path;

use crate::codegen::workspace_root;

/// The string literal at the start of `text` (after whitespace), if it is a PascalCase word.
fn reason_literal(text: &str) -> Option<&str> {
    let rest = text.trim_start().strip_prefix('"')?;
    let word = &rest[..rest.find('"')?];
    let pascal = word.chars().next().is_some_and(|c| c.is_ascii_uppercase())
        && word.chars().all(|c| c.is_ascii_alphanumeric())
        && word.chars().any(|c| c.is_ascii_lowercase());
    pascal.then_some(word)
}

/// The reasons of one source file's non-test code: `reason: "X"`, the reason argument of
/// `Desired::ok`/`Desired::not_ok` (the second), an error `category()` arm (`=> "X"` in
/// `error.rs`) and a `REASON` constant.
fn reasons_in(source: &str, is_error_rs: bool) -> Vec<String> {
    let code = source.split("#[cfg(test)]").next().unwrap_or(source);
    let mut out = Vec::new();
    let mut push = |found: Option<&str>| {
        if let Some(reason) = found {
            out.push(reason.to_owned());
        }
    };
    for (index, _) in code.match_indices("reason: ") {
        push(reason_literal(&code[index + "reason: ".len()..]));
    }
    for call in ["Desired::ok(", "Desired::not_ok("] {
        for (index, _) in code.match_indices(call) {
            let args = &code[index + call.len()..];
            push(
                args.split_once(',')
                    .and_then(|(_, rest)| reason_literal(rest)),
            );
        }
    }
    for (index, _) in code.match_indices("REASON: &str = ") {
        push(reason_literal(&code[index + "REASON: &str = ".len()..]));
    }
    if is_error_rs {
        for (index, _) in code.match_indices("=> ") {
            push(reason_literal(&code[index + 3..]));
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") && !path.ends_with("tests.rs") {
            out.push(path);
        }
    }
}

#[test]
fn the_reason_scan_finds_each_form() {
    let source = "Warning { reason: \"ConfigIgnored\", .. }\nDesired::not_ok(\n    O::CONDITION,\n    \"NodesNotServed\",\n    x)\nDesired::ok(A, \"Ready\", m)\npub const REASON: &str = \"DeprecatedField\";\nlet reason: String = x;\n#[cfg(test)]\nreason: \"OnlyInTests\"";
    // In the order of the scan: `reason:`, `Desired::ok`, `Desired::not_ok`, `REASON`.
    assert_eq!(
        reasons_in(source, false),
        [
            "ConfigIgnored",
            "Ready",
            "NodesNotServed",
            "DeprecatedField"
        ]
    );
    assert_eq!(
        reasons_in("Self::X(_) => \"InvalidSpec\",", true),
        ["InvalidSpec"]
    );
}

#[test]
fn every_reason_the_operator_writes_is_in_the_book() {
    let root = workspace_root();
    let mut files = Vec::new();
    for entry in std::fs::read_dir(root.join("crates")).unwrap() {
        let src = entry.unwrap().path().join("src");
        if src.is_dir() {
            rust_files(&src, &mut files);
        }
    }
    let book = [
        std::fs::read_to_string(root.join("docs/troubleshooting.md")).unwrap(),
        std::fs::read_to_string(root.join("docs/reference/reasons.md")).unwrap(),
    ]
    .join("\n");
    let mut missing = Vec::new();
    let mut seen = 0;
    for file in &files {
        let source = std::fs::read_to_string(file).unwrap();
        for reason in reasons_in(&source, file.ends_with("error.rs")) {
            seen += 1;
            if !book.contains(&format!("`{reason}`")) {
                missing.push(format!("{reason} ({})", file.display()));
            }
        }
    }
    // The scan itself works on the real sources (a positive control: there are dozens).
    assert!(seen > 20, "only {seen} reasons found");
    missing.sort();
    missing.dedup();
    assert!(
        missing.is_empty(),
        "reasons not in docs/troubleshooting.md (nor the generated reasons page): {missing:#?}"
    );
}
