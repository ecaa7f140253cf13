//! The book's pages with commands, run as a user would run them: every `sh` block of
//! `docs/getting-started.md` and `docs/migrating.md` (except those marked
//! `<!-- docs-test: skip (why) -->` on the line before) runs in order, with bash, against the local
//! cluster. kwok runs no containers, so once a page's `helm install` or `helm upgrade` has put the
//! chart's ServiceAccount in place, the operator runs as a host process under that ServiceAccount's
//! token (as in the chart scenario). A block that fails names the page and the line it starts on.
//! Both pages install release `gpu-operator` into namespace `gpu-operator`, so they take turns.
#![cfg(feature = "e2e")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod getting_started;
mod migrating;
mod nvidia_release;

use std::{path::Path, process::Command};

use gpu_operator_e2e::scenario::Env;
use gpu_operator_harness::{
    access::kubectl_ok,
    chart::{helm_ok, token_kubeconfig},
    operator::Operator,
    unique_name,
};

/// The release and namespace the pages install into (the chart's ServiceAccount has its name).
const RELEASE: &str = "gpu-operator";
/// The ClusterPolicy the chart renders.
const POLICY: &str = "cluster-policy";

/// One page at a time: both use the same release, namespace and ClusterPolicy.
static PAGES: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

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

/// What a page's run starts from: its `sh` blocks, an admin client with the CRD and the
/// RuntimeClass in place, a scratch directory, and (dropped in this order) the cleanup of what the
/// page creates, then the end of its turn.
struct Page {
    blocks: Vec<(usize, String)>,
    client: kube::Client,
    dir: std::path::PathBuf,
    _cleanup: Cleanup,
    _turn: tokio::sync::MutexGuard<'static, ()>,
}

impl Page {
    /// Waits for the turn of `page` (relative to the repository root, with at least `least`
    /// blocks) and prepares its run.
    async fn start(page: &str, least: usize) -> Self {
        let turn = PAGES.lock().await;
        let blocks = page_blocks(page, least);
        assert_no_release();
        let client = gpu_operator_harness::client().await.unwrap();
        gpu_operator_harness::crd::ensure_crd().await.unwrap();
        gpu_operator_e2e::scenario::ensure_runtime_class();
        let name = page.trim_start_matches("docs/").trim_end_matches(".md");
        Self {
            blocks,
            client,
            dir: scratch(&format!("docs-{name}")),
            _cleanup: Cleanup,
            _turn: turn,
        }
    }
}

/// The `sh` blocks of `page` (relative to the repository root), at least `least` of them.
fn page_blocks(page: &str, least: usize) -> Vec<(usize, String)> {
    let text = std::fs::read_to_string(gpu_operator_harness::crd::repo_root().join(page)).unwrap();
    let blocks = shell_blocks(&text);
    assert!(
        blocks.len() >= least,
        "{page}: only {} sh blocks",
        blocks.len()
    );
    blocks
}

/// Runs one block with bash in `dir`; fails naming the page and line. Returns its stdout.
fn run_block(page: &str, line: usize, script: &str, dir: &Path) -> String {
    println!("==> {page}:{line}\n{script}");
    let output = Command::new("bash")
        .args(["-euo", "pipefail", "-c", script])
        .current_dir(dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}{stderr}");
    assert!(
        output.status.success(),
        "{page}:{line}: the block failed ({}):\n{script}\n{stderr}",
        output.status
    );
    stdout
}

/// Fails when release [`RELEASE`] is installed already.
fn assert_no_release() {
    assert!(
        helm_ok(&["status", RELEASE, "-n", RELEASE]).is_err(),
        "a release {RELEASE} is installed already (`cargo xtask demo`?): remove it with `cargo xtask demo --down` or `helm uninstall {RELEASE} -n {RELEASE}`"
    );
}

/// A scratch directory for one page's run.
fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(unique_name(name));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Starts the operator as a host process under the token of the chart's ServiceAccount.
async fn start_operator(client: &kube::Client, dir: &Path) -> Operator {
    let (kubeconfig, user) = token_kubeconfig(client, RELEASE, RELEASE, dir)
        .await
        .unwrap();
    let env = Env {
        client: client.clone(),
        namespace: RELEASE.to_owned(),
        kubeconfig,
        user,
        dir: dir.to_owned(),
    };
    env.start(&[])
}

/// Removes what a page created, whatever it got to, and waits for its namespace to go (the next
/// page installs into it again).
struct Cleanup;

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = helm_ok(&["uninstall", RELEASE, "-n", RELEASE, "--no-hooks", "--wait"]);
        let _ = kubectl_ok(&["delete", "clusterpolicy", POLICY, "--ignore-not-found"]);
        let _ = kubectl_ok(&[
            "delete",
            "namespace",
            RELEASE,
            "--ignore-not-found",
            "--timeout=120s",
        ]);
    }
}
