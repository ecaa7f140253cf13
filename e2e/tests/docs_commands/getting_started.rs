//! `docs/getting-started.md`: install, watch the ClusterPolicy get ready, uninstall.

use gpu_operator_harness::crd::repo_root;

use crate::{Page, run_block, start_operator};

const PAGE: &str = "docs/getting-started.md";

#[tokio::test]
async fn the_getting_started_page_works_as_written() {
    let page = Page::start(PAGE, 3).await;
    let mut operator = None;
    for (line, script) in &page.blocks {
        run_block(PAGE, *line, script, &repo_root());
        if operator.is_none() && script.contains("helm install") {
            operator = Some(start_operator(&page.client, &page.dir).await);
        }
    }
    let operator = operator.expect("no block of the page ran helm install");
    operator.stop().unwrap();
}
