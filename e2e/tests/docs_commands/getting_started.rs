//! `docs/getting-started.md`: install, watch the ClusterPolicy get ready, uninstall.

use gpu_operator_e2e::scenario::ensure_runtime_class;
use gpu_operator_harness::{
    client,
    crd::{ensure_crd, repo_root},
};

use crate::{Cleanup, PAGES, assert_no_release, page_blocks, run_block, scratch, start_operator};

const PAGE: &str = "docs/getting-started.md";

#[tokio::test]
async fn the_getting_started_page_works_as_written() {
    let _turn = PAGES.lock().await;
    let blocks = page_blocks(PAGE, 3);
    assert_no_release();
    let client = client().await.unwrap();
    ensure_crd().await.unwrap();
    ensure_runtime_class();
    let _cleanup = Cleanup;
    let dir = scratch("docs-getting-started");
    let mut operator = None;
    for (line, script) in &blocks {
        run_block(PAGE, *line, script, &repo_root());
        if operator.is_none() && script.contains("helm install") {
            operator = Some(start_operator(&client, &dir).await);
        }
    }
    let operator = operator.expect("no block of the page ran helm install");
    operator.stop().unwrap();
}
