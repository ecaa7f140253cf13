//! Creating the simulated fleet through the API server and waiting until kwok has initialised it.

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use futures::{StreamExt as _, TryStreamExt as _, stream};
use gpu_operator_harness::fleet::{Fleet, KWOK_LABEL};
use k8s_openapi::api::core::v1::Node;
use kube::{
    Api,
    api::{ListParams, PostParams},
};

use crate::process;

/// Requests in flight while creating nodes; enough to keep the API server busy on 2 cores.
const CONCURRENCY: usize = 32;

/// Creates every node of `fleet` (existing ones are kept) and waits until all are Ready.
pub async fn create_fleet(client: &kube::Client, fleet: &Fleet) -> anyhow::Result<()> {
    let api: Api<Node> = Api::all(client.clone());
    let total = fleet.total() as usize;
    let started = Instant::now();
    eprintln!("==> creating {total} simulated nodes ({fleet})");
    let mut created = 0usize;
    let mut last_report = Instant::now();
    let mut results = stream::iter(fleet.nodes())
        .map(|(profile, name)| {
            let api = api.clone();
            async move {
                match api
                    .create(&PostParams::default(), &profile.node(&name))
                    .await
                {
                    Ok(_) => Ok(()),
                    Err(kube::Error::Api(status)) if status.is_already_exists() => Ok(()),
                    Err(error) => Err(error).with_context(|| format!("creating node {name}")),
                }
            }
        })
        .buffer_unordered(CONCURRENCY);
    while let Some(result) = results.next().await {
        result?;
        created += 1;
        if last_report.elapsed() >= Duration::from_secs(5) {
            eprintln!(
                "    … {created}/{total} nodes created ({})",
                process::minutes(started.elapsed())
            );
            last_report = Instant::now();
        }
    }
    eprintln!(
        "    {total} nodes created in {}",
        process::minutes(started.elapsed())
    );
    wait_ready(&api, total).await?;
    eprintln!(
        "    {total} nodes Ready after {}",
        process::minutes(started.elapsed())
    );
    Ok(())
}

async fn wait_ready(api: &Api<Node>, total: usize) -> anyhow::Result<()> {
    let started = Instant::now();
    let deadline = started + Duration::from_secs(600);
    let selector = format!("{}={}", KWOK_LABEL.0, KWOK_LABEL.1);
    loop {
        let ready = count_ready(api, &selector).await?;
        if ready >= total {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "only {ready} of {total} simulated nodes became Ready within 10 minutes: see the kwok log"
            );
        }
        eprintln!("    … {ready}/{total} nodes Ready");
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// Counts the nodes matching `selector` whose Ready condition is True, page by page.
pub async fn count_ready(api: &Api<Node>, selector: &str) -> anyhow::Result<usize> {
    let params = ListParams::default().labels(selector).limit(500);
    let pages = stream::try_unfold(Some(params), |params| {
        let api = api.clone();
        async move {
            let Some(params) = params else {
                return Ok::<_, kube::Error>(None);
            };
            let page = api.list(&params).await?;
            let next = page
                .metadata
                .continue_
                .clone()
                .filter(|c| !c.is_empty())
                .map(|c| params.clone().continue_token(&c));
            let ready = page.items.iter().filter(|node| is_ready(node)).count();
            Ok(Some((ready, next)))
        }
    });
    Ok(pages
        .try_fold(0, |sum, n| async move { Ok(sum + n) })
        .await?)
}

/// Whether the node's `Ready` condition is `True`.
pub fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}
