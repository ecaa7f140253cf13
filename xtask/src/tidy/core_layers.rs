//! Core's folders are layers: a folder imports only folders below it (ARCHITECTURE.md, crate
//! map). This test reads every `crate::<folder>` path of core's folders, `use` groups included,
//! and fails naming the file and line of an import that reaches up.

use super::walk::{self, relative};

/// Core's folders, bottom first: each may import the ones before it. The crate root's
/// `Context` (`context.rs`) and `Error` (`error.rs`) are no folder: every layer may name them.
const LAYERS: [&str; 5] = ["cache", "build", "contract", "report", "pipeline"];

/// Imports that reach up today, as `<file> -> <folder>`; each waits for a move that touches code
/// another change owns. The test fails for a new one and for one that is gone but still listed,
/// so the list only shrinks.
const KNOWN_UPWARD: [&str; 2] = [
    // Writing ServiceMonitors (I/O) sits beside their pure builder; it belongs in `pipeline`.
    "crates/gpu-operator-core/src/build/service_monitor.rs -> pipeline",
    // A condition's progress step is `pipeline::write_gate::step` (the status writer's file).
    "crates/gpu-operator-core/src/report/conditions.rs -> pipeline",
];

/// The first segment of every `crate::` path in `text`, with its line (1-based): `crate::a::b`
/// gives `a`, `crate::{a::b, c}` gives `a` and `c`. Comment lines are skipped (doc links are no
/// imports).
fn crate_paths(text: &str) -> Vec<(String, usize)> {
    let code: String = text
        .lines()
        .map(|line| {
            if line.trim_start().starts_with("//") {
                ""
            } else {
                line
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let bytes = code.as_bytes();
    let line_of = |at: usize| code[..at].matches('\n').count() + 1;
    let ident_at = |at: usize| -> &str {
        let end = code[at..]
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .map_or(code.len(), |n| at + n);
        &code[at..end]
    };
    let mut found = Vec::new();
    for (start, _) in code.match_indices("crate::") {
        let mut at = start + "crate::".len();
        if bytes.get(at) != Some(&b'{') {
            found.push((ident_at(at).to_owned(), line_of(at)));
            continue;
        }
        // A group: the first name after `{` and after each `,` at depth 1.
        let mut depth = 0;
        let mut expect_name = false;
        while at < bytes.len() {
            match bytes[at] {
                b'{' => {
                    depth += 1;
                    expect_name = depth == 1;
                }
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                b',' => expect_name = depth == 1,
                c if expect_name && (c.is_ascii_alphabetic() || c == b'_') => {
                    found.push((ident_at(at).to_owned(), line_of(at)));
                    expect_name = false;
                }
                _ => {}
            }
            at += 1;
        }
    }
    found
}

#[test]
fn core_folders_import_only_the_layers_below() {
    let src = walk::root().join("crates/gpu-operator-core/src");
    let mut upward = Vec::new();
    let mut edges = 0;
    for (rank, folder) in LAYERS.iter().enumerate() {
        let mut files = Vec::new();
        walk::rust_files(&src.join(folder), &mut files);
        assert!(
            !files.is_empty(),
            "core has no folder {folder}: update LAYERS"
        );
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            for (name, line) in crate_paths(&text) {
                let Some(target) = LAYERS.iter().position(|layer| *layer == name) else {
                    continue;
                };
                edges += usize::from(target < rank);
                if target > rank {
                    upward.push((relative(&file), name, line));
                }
            }
        }
    }
    assert!(
        edges > 10,
        "found too few imports between core's folders: is the parser broken?"
    );
    let key = |(file, name, _): &(String, String, usize)| format!("{file} -> {name}");
    let new: Vec<String> = upward
        .iter()
        .filter(|edge| !KNOWN_UPWARD.contains(&key(edge).as_str()))
        .map(|(file, name, line)| format!("{file}:{line} imports crate::{name}"))
        .collect();
    assert!(
        new.is_empty(),
        "core's folders are layered {LAYERS:?} (bottom first): a folder imports only the ones \
         before it. Move the shared item down, or the importing code up: {new:#?}"
    );
    let gone: Vec<&&str> = KNOWN_UPWARD
        .iter()
        .filter(|known| !upward.iter().any(|edge| key(edge) == **known))
        .collect();
    assert!(
        gone.is_empty(),
        "no longer imported upward: take these off KNOWN_UPWARD: {gone:#?}"
    );
}

#[test]
fn crate_paths_are_read_from_paths_and_groups() {
    let text = "//! See [`crate::pipeline`].\n\
                use crate::{\n    Context, Error,\n    build::{meta, pod},\n    cache::stores,\n};\n\
                fn f() { crate::report::x(); }\n";
    let found = crate_paths(text);
    assert_eq!(
        found,
        [
            ("Context".to_owned(), 3),
            ("Error".to_owned(), 3),
            ("build".to_owned(), 4),
            ("cache".to_owned(), 5),
            ("report".to_owned(), 7),
        ]
    );
}
