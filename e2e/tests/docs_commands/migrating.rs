//! `docs/migrating.md`: from a release of NVIDIA's chart (a stand-in, `nvidia_release`) with the
//! objects NVIDIA's operator made for its ClusterPolicy (`nvidia_fixture`), the page's commands
//! switch the release to this chart with NVIDIA's v26.7.0 values file, unedited, as
//! `my-values.yaml`; then roll back. Besides each block succeeding, the test checks what the page
//! says happens: Helm removes NFD, the operator removes NVIDIA's leftovers and names them in one
//! Event, and the rollback brings NVIDIA's operator Deployment and NFD back.

use std::path::Path;

use gpu_operator_e2e::nvidia_fixture::Fixture;
use gpu_operator_harness::{crd::repo_root, operator::Operator};
use k8s_openapi::api::{
    apps::v1::{DaemonSet, Deployment},
    core::v1::Event,
};
use kube::{Api, api::ListParams};

use crate::{
    POLICY, Page, RELEASE,
    nvidia_release::{self, NFD_WORKER, OPERATOR_IMAGE},
    run_block, start_operator,
};

const PAGE: &str = "docs/migrating.md";
/// The values file of NVIDIA's release the fixture comes from, as a user keeps it.
const VALUES: &str = "../shared/fixtures/nvidia/values/v26.7.0.yaml";
/// Our node-discovery agent, which the chart adds where NFD was.
const DISCOVERY: &str = "gpu-operator-node-discovery";

#[tokio::test]
async fn the_migration_page_works_as_written() {
    let page = Page::start(PAGE, 3).await;
    let (client, dir) = (&page.client, &page.dir);

    // Where the page starts: NVIDIA's release, its operator's objects, the user's values file, and
    // the chart where the page's `charts/gpu-operator` finds it.
    let fixture = Fixture::read();
    let chart = nvidia_release::write(dir, &fixture);
    helm_install(&chart);
    let policy = fixture.write_status(client, POLICY).await;
    fixture.create_objects(client, RELEASE, &policy).await;
    std::fs::copy(repo_root().join(VALUES), dir.join("my-values.yaml")).unwrap();
    std::os::unix::fs::symlink(repo_root().join("charts"), dir.join("charts")).unwrap();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), RELEASE);
    let daemonsets: Api<DaemonSet> = Api::namespaced(client.clone(), RELEASE);

    let mut operator: Option<Operator> = None;
    let mut rolled_back = false;
    for (line, script) in &page.blocks {
        if script.contains("helm rollback") {
            // The block's first command deletes our operator's Deployment: stop the host process.
            if let Some(operator) = operator.take() {
                operator.stop().unwrap();
            }
            rolled_back = true;
        }
        run_block(PAGE, *line, script, dir);
        if operator.is_none() && !rolled_back && script.contains("helm upgrade") {
            assert!(
                daemonsets.get_opt(NFD_WORKER).await.unwrap().is_none(),
                "Helm left NVIDIA's node-feature-discovery worker"
            );
            operator = Some(start_operator(client, dir).await);
        }
        if script.contains("RemovedLeftovers") {
            let note = leftovers_event(client).await;
            assert!(
                note.as_deref()
                    .is_some_and(|n| n.contains("RoleBinding nvidia-driver")),
                "no Event naming NVIDIA's leftovers: {note:?}"
            );
        }
    }
    assert!(rolled_back, "{PAGE}: no block rolls back");
    let nvidia = deployments.get(RELEASE).await.unwrap();
    let image = nvidia
        .spec
        .and_then(|s| s.template.spec)
        .and_then(|s| s.containers.into_iter().next())
        .and_then(|c| c.image);
    assert_eq!(
        image.as_deref(),
        Some(OPERATOR_IMAGE),
        "NVIDIA's operator is back"
    );
    assert!(
        daemonsets.get_opt(NFD_WORKER).await.unwrap().is_some(),
        "NFD is back"
    );
    assert!(
        daemonsets.get_opt(DISCOVERY).await.unwrap().is_none(),
        "the rollback removed our discovery agent"
    );
}

/// Installs NVIDIA's stand-in release and waits for nothing: the page starts from it.
fn helm_install(chart: &Path) {
    let chart = chart.to_str().unwrap();
    gpu_operator_harness::chart::helm_ok(&[
        "install",
        RELEASE,
        chart,
        "-n",
        RELEASE,
        "--create-namespace",
    ])
    .unwrap();
}

/// The message of the Event naming what the operator removed, if there is one yet.
async fn leftovers_event(client: &kube::Client) -> Option<String> {
    let events: Api<Event> = Api::all(client.clone());
    let selector = format!("involvedObject.name={POLICY},reason=RemovedLeftovers");
    let list = events
        .list(&ListParams::default().fields(&selector))
        .await
        .unwrap();
    list.items.into_iter().find_map(|e| e.message)
}
