//! The caches' tolerance of a kind the API server does not serve (a CRD not installed).

use super::*;

fn api_error(code: u16) -> kube::Error {
    kube::Error::Api(
        kube::core::Status::failure(
            "the server could not find the requested resource",
            "NotFound",
        )
        .with_code(code)
        .boxed(),
    )
}

#[test]
fn a_kind_the_api_server_does_not_serve_reads_as_an_empty_synced_list() {
    let events =
        tolerate_missing::<ConfigMap>(Err(watcher::Error::InitialListFailed(api_error(404))));
    assert!(matches!(
        events.as_slice(),
        [Ok(watcher::Event::Init), Ok(watcher::Event::InitDone)]
    ));
    assert!(resource_missing(&watcher::Error::WatchStartFailed(
        api_error(404)
    )));
}

#[test]
fn other_errors_and_events_pass_unchanged() {
    let forbidden =
        tolerate_missing::<ConfigMap>(Err(watcher::Error::InitialListFailed(api_error(403))));
    assert!(matches!(forbidden.as_slice(), [Err(_)]));
    let apply = tolerate_missing(Ok(watcher::Event::Apply(ConfigMap::default())));
    assert!(matches!(apply.as_slice(), [Ok(watcher::Event::Apply(_))]));
}

#[tokio::test]
async fn the_store_of_a_missing_kind_becomes_ready_and_empty() {
    let (store, writer) = reflector::store::<ConfigMap>();
    let events =
        futures::stream::iter(vec![Err(watcher::Error::InitialListFailed(api_error(404)))])
            .flat_map(|event| futures::stream::iter(tolerate_missing(event)));
    reflector::reflector(writer, events)
        .for_each(|_| async {})
        .await;
    store.wait_until_ready().await.unwrap();
    assert!(store.state().is_empty());
}
