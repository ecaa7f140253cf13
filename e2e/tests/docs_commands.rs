//! The book's getting-started page, run as a user would run it: every `sh` block of
//! `docs/getting-started.md` (except those marked `<!-- docs-test: skip (why) -->` on the line
//! before) runs in order, with bash, from the repository root, against the local cluster. kwok
//! runs no containers, so once the page's `helm install` has created the chart's ServiceAccount,
//! the operator runs as a host process under that ServiceAccount's token (as in the chart
//! scenario). A block that fails names the page and the line it starts on.
#![cfg(feature = "e2e")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;

use gpu_operator_e2e::scenario::{Env, ensure_runtime_class};
use gpu_operator_harness::{
    access::kubectl_ok,
    chart::{helm_ok, token_kubeconfig},
    client,
    crd::{ensure_crd, repo_root},
    unique_name,
};

/// The page, relative to the repository root.
const PAGE: &str = "docs/getting-started.md";
/// The release and namespace the page installs into.
const RELEASE: &str = "gpu-operator";

/// The `sh` blocks of a Markdown page that are not marked skipped: the line each starts on, and
/// its text.
fn shell_blocks(text: &str) -> Vec<(usize, String)> {
    let mut blocks = Vec::new();
    let mut open: Option<usize> = None;
    let mut body = String::new();
    let mut previous = "";
    for (index, line) in text.lines().enumerate() {
        if let Some(start) = open {
            if line.trim_start().starts_with("```") {
                blocks.push((start, std::mem::take(&mut body)));
                open = None;
            } else {
                body.push_str(line);
                body.push('\n');
            }
        } else if line.trim() == "```sh" && !previous.starts_with("<!-- docs-test: skip") {
            open = Some(index + 1);
        }
        previous = line;
    }
    blocks
}

#[test]
fn blocks_are_found_with_their_line_and_skips_are_honoured() {
    let text = "a\n```sh\necho one\n```\n<!-- docs-test: skip (why) -->\n```sh\nno\n```\n```text\nno\n```\n```sh\necho two\necho three\n```\n";
    assert_eq!(
        shell_blocks(text),
        [
            (2, "echo one\n".to_owned()),
            (12, "echo two\necho three\n".to_owned())
        ]
    );
}

/// Removes what the page created, whatever it got to.
struct Cleanup;

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = helm_ok(&["uninstall", RELEASE, "-n", RELEASE, "--no-hooks", "--wait"]);
        let _ = kubectl_ok(&["delete", "namespace", RELEASE, "--wait=false"]);
    }
}

#[tokio::test]
async fn the_getting_started_page_works_as_written() {
    let text = std::fs::read_to_string(repo_root().join(PAGE)).unwrap();
    let blocks = shell_blocks(&text);
    assert!(blocks.len() >= 3, "{PAGE}: only {} sh blocks", blocks.len());
    assert!(
        helm_ok(&["status", RELEASE, "-n", RELEASE]).is_err(),
        "a release {RELEASE} is installed already (`cargo xtask demo`?): remove it with `cargo xtask demo --down` or `helm uninstall {RELEASE} -n {RELEASE}`"
    );
    let client = client().await.unwrap();
    ensure_crd().await.unwrap();
    ensure_runtime_class();
    let _cleanup = Cleanup;
    let dir = std::env::temp_dir().join(unique_name("docs-commands"));
    std::fs::create_dir_all(&dir).unwrap();
    let mut operator = None;
    for (line, script) in &blocks {
        println!("==> {PAGE}:{line}\n{script}");
        let output = Command::new("bash")
            .args(["-euo", "pipefail", "-c", script])
            .current_dir(repo_root())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        println!("{stdout}{stderr}");
        assert!(
            output.status.success(),
            "{PAGE}:{line}: the block failed ({}):\n{script}\n{stderr}",
            output.status
        );
        if operator.is_none() && script.contains("helm install") {
            let (kubeconfig, user) = token_kubeconfig(&client, RELEASE, RELEASE, &dir)
                .await
                .unwrap();
            let env = Env {
                client: client.clone(),
                namespace: RELEASE.to_owned(),
                kubeconfig,
                user,
                dir: dir.clone(),
            };
            operator = Some(env.start(&[]));
        }
    }
    let operator = operator.expect("no block of the page ran helm install");
    operator.stop().unwrap();
}
