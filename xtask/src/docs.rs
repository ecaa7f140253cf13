//! The documentation book in `docs/` (mdBook): its generated pages (the ClusterPolicy field
//! reference from the CRD, the condition reasons from `gpu-operator-api`'s constants), a link
//! check of every page that names the page and line of a broken link, and `mdbook build`.

mod links;
mod reference;

use std::{path::Path, process::Command};

use anyhow::{Context as _, bail};

use crate::{
    cluster::{Layout, MDBOOK},
    process,
};

#[cfg(test)]
pub use reference::HEADER as GENERATED_HEADER;
pub use reference::generated_pages;

/// The book's directory, relative to the workspace root.
pub const BOOK_DIR: &str = "docs";

/// Fails with every broken link of the book, each as `page:line: target (why)`.
pub fn check_links(root: &Path) -> anyhow::Result<()> {
    let broken = links::broken_links(&root.join(BOOK_DIR))?;
    if !broken.is_empty() {
        bail!(
            "{} broken link(s) in the book:\n{}",
            broken.len(),
            broken.join("\n")
        );
    }
    Ok(())
}

/// mdBook in the harness cache, installed with `cargo install` the first time (about 3 minutes
/// on 2 cores; no default features: no server, no file watcher).
pub fn ensure_mdbook(layout: &Layout) -> anyhow::Result<std::path::PathBuf> {
    let root = layout.mdbook_root();
    let binary = root.join("bin/mdbook");
    if binary.is_file() {
        return Ok(binary);
    }
    eprintln!(
        "==> installing mdbook {MDBOOK} into {} (first time only: about 3 min on 2 cores)",
        root.display()
    );
    let build_dir = layout.mdbook_build();
    process::run(
        Command::new(env!("CARGO"))
            .args(["install", "mdbook", "--locked", "--no-default-features"])
            .args(["--version", MDBOOK, "--root"])
            .arg(&root)
            .env("CARGO_TARGET_DIR", &build_dir),
    )?;
    // The build directory is large and only needed again for another version.
    let _ = std::fs::remove_dir_all(&build_dir);
    Ok(binary)
}

/// Checks the links and builds the book into `target/book` with `mdbook`.
pub fn build(root: &Path, mdbook: &Path) -> anyhow::Result<()> {
    check_links(root)?;
    let out = root.join("target/book");
    process::run(
        Command::new(mdbook)
            .arg("build")
            .arg(root.join(BOOK_DIR))
            .arg("--dest-dir")
            .arg(&out),
    )
    .context("mdbook build")?;
    eprintln!("    the book is in {}", out.join("index.html").display());
    Ok(())
}

#[cfg(test)]
mod tests {
    mod reasons;

    use super::*;
    use crate::codegen::workspace_root;

    #[test]
    fn every_link_of_the_book_resolves() {
        check_links(&workspace_root()).unwrap();
    }
}
