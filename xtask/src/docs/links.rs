//! The book's link check: every relative link of every page (outside code blocks) must name a
//! file of the book, and its `#anchor` a heading of that page, by mdBook's rule for heading ids.
//! Links that leave the book are refused too: the built site would not have their target.

use std::path::{Component, Path, PathBuf};

use anyhow::Context as _;

/// Every broken link of the Markdown pages under `book`, as `page:line: target (why)`.
pub fn broken_links(book: &Path) -> anyhow::Result<Vec<String>> {
    let mut pages = Vec::new();
    markdown_files(book, &mut pages)?;
    pages.sort();
    let mut broken = Vec::new();
    for page in &pages {
        let text =
            std::fs::read_to_string(page).with_context(|| format!("reading {}", page.display()))?;
        let shown = page
            .strip_prefix(book.parent().unwrap_or(book))
            .unwrap_or(page);
        for (line, target) in links(&text) {
            if let Err(why) = check(book, page, &target) {
                broken.push(format!("{}:{line}: {target} ({why})", shown.display()));
            }
        }
    }
    Ok(broken)
}

fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            markdown_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
    Ok(())
}

/// The link targets of a Markdown text with their line numbers, outside fenced code blocks and
/// inline code.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fenced = false;
    for (index, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Inline code spans are every other piece between backticks.
        for (piece, prose) in line.split('`').zip([true, false].into_iter().cycle()) {
            if !prose {
                continue;
            }
            let mut rest = piece;
            while let Some(start) = rest.find("](") {
                rest = &rest[start + 2..];
                let end = rest.find(')').unwrap_or(rest.len());
                let target = rest[..end].split_whitespace().next().unwrap_or("");
                out.push((index + 1, target.to_owned()));
                rest = &rest[end..];
            }
        }
    }
    out
}

/// Whether `target`, linked from `page`, resolves inside `book`.
fn check(book: &Path, page: &Path, target: &str) -> Result<(), String> {
    if target.contains("://") || target.starts_with("mailto:") {
        return Ok(());
    }
    let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
    let file = if path.is_empty() {
        page.to_path_buf()
    } else {
        normalise(&page.parent().unwrap_or(book).join(path))
    };
    if !file.starts_with(book) {
        return Err(
            "outside the book: link the page's source on the forge, or name the path in code"
                .into(),
        );
    }
    if !file.exists() {
        return Err("no such file".into());
    }
    if anchor.is_empty() || file.extension().is_none_or(|e| e != "md") {
        return Ok(());
    }
    let text = std::fs::read_to_string(&file).map_err(|e| e.to_string())?;
    if heading_ids(&text).iter().any(|id| id == anchor) {
        Ok(())
    } else {
        Err(format!("no heading #{anchor} in {}", file.display()))
    }
}

/// `path` without `.` and `..` components (the file need not exist).
fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The ids mdBook gives the headings of a page: lowercase, alphanumerics, `-` and `_` kept,
/// whitespace made `-`, anything else dropped; a repeated id gets `-1`, `-2`, ...
fn heading_ids(text: &str) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    let mut bases: Vec<String> = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if fenced || !line.starts_with('#') {
            continue;
        }
        let title = line.trim_start_matches('#').trim();
        let id: String = title
            .chars()
            .filter_map(|c| {
                if c.is_alphanumeric() || c == '_' || c == '-' {
                    Some(c.to_ascii_lowercase())
                } else if c.is_whitespace() {
                    Some('-')
                } else {
                    None
                }
            })
            .collect();
        let repeats = bases.iter().filter(|b| **b == id).count();
        bases.push(id.clone());
        ids.push(if repeats == 0 {
            id
        } else {
            format!("{id}-{repeats}")
        });
    }
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_outside_code_are_found_with_their_line() {
        let text =
            "a [x](one.md) b\n```sh\n[y](no.md)\n```\n`[z](code.md)` and [w](two.md#part \"t\")\n";
        assert_eq!(
            links(text),
            [(1, "one.md".to_owned()), (5, "two.md#part".to_owned())]
        );
    }

    #[test]
    fn heading_ids_follow_mdbooks_rule() {
        let text =
            "# Installing with Helm\n## `cargo xtask ci`: what it runs\n## Notes\n## Notes\n";
        assert_eq!(
            heading_ids(text),
            [
                "installing-with-helm",
                "cargo-xtask-ci-what-it-runs",
                "notes",
                "notes-1"
            ]
        );
    }

    #[test]
    fn a_missing_page_a_missing_heading_and_a_link_out_of_the_book_are_named() {
        let book = std::env::temp_dir().join(format!("gpu-operator-book-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&book);
        std::fs::create_dir_all(book.join("guides")).unwrap();
        std::fs::write(
            book.join("index.md"),
            "# Home\n[ok](guides/a.md#a-title)\n[gone](guides/b.md)\n[anchor](guides/a.md#nope)\n[out](../README.md)\n[web](https://example.com)\n",
        )
        .unwrap();
        std::fs::write(
            book.join("guides/a.md"),
            "# A title\n[back](../index.md#home)\n",
        )
        .unwrap();
        let broken = broken_links(&book).unwrap();
        let name = book.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(broken.len(), 3, "{broken:#?}");
        assert!(broken[0].starts_with(&format!("{name}/index.md:3: guides/b.md (no such file")));
        assert!(broken[1].starts_with(&format!("{name}/index.md:4: guides/a.md#nope (no heading")));
        assert!(broken[2].starts_with(&format!(
            "{name}/index.md:5: ../README.md (outside the book"
        )));
        std::fs::remove_dir_all(&book).unwrap();
    }
}
