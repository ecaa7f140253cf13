//! The upgrade reconciler's own caches as trigger streams: each watch fills its cache and yields
//! every object it touched (applied or deleted), so a pass wakes on every change the cache saw.
//!
//! Not kube's shared reflector subscription (`Writer::subscribe`): its handle looks each changed
//! object up in the cache, and when the object was deleted before the handle read its event (a
//! driver pod replaced during an upgrade) it answers `Pending` without asking to be woken again,
//! so the stream never yields again and the upgrade stalls (seen at 1,000 nodes: 215 nodes done,
//! the rest waiting for a pass that never came).

use std::sync::Arc;

use futures::{Stream, StreamExt as _};
use kube::runtime::{WatchStreamExt as _, reflector::store::Writer, watcher};

/// Fills `writer`'s cache from `events` and yields each object an event applied or deleted;
/// watch errors are retried by the watcher's backoff and yield nothing.
pub fn touched<K>(
    events: impl Stream<Item = watcher::Result<watcher::Event<K>>> + Send,
    writer: Writer<K>,
) -> impl Stream<Item = Arc<K>> + Send
where
    K: kube::Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Send + Sync,
{
    events
        .reflect(writer)
        .touched_objects()
        .filter_map(|object| std::future::ready(object.ok().map(Arc::new)))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::stream;
    use k8s_openapi::api::core::v1::Pod;
    use kube::{api::ObjectMeta, runtime::reflector};

    use super::*;

    fn pod(name: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some("gpu-operator".to_owned()),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }
    }

    #[tokio::test]
    async fn a_pod_deleted_before_its_event_is_read_stalls_nothing() {
        let (store, writer) = reflector::store::<Pod>();
        let events = stream::iter([
            Ok(watcher::Event::Init),
            Ok(watcher::Event::InitApply(pod("old-driver"))),
            Ok(watcher::Event::InitDone),
            Ok(watcher::Event::Apply(pod("old-driver"))),
            Ok(watcher::Event::Delete(pod("old-driver"))),
            Ok(watcher::Event::Apply(pod("new-driver"))),
        ]);
        // Polled the way the Controller polls its triggers: among other streams, each woken only
        // by its own waker.
        let triggers = stream::select_all([touched(events, writer).boxed()]);
        let names: Vec<String> = tokio::time::timeout(
            Duration::from_secs(5),
            triggers
                .map(|p| p.metadata.name.clone().unwrap_or_default())
                .collect(),
        )
        .await
        .expect("the trigger stream stalled");
        assert_eq!(
            names,
            ["old-driver", "old-driver", "old-driver", "new-driver"],
            "listed, applied, deleted, and its successor: each wakes a pass"
        );
        assert_eq!(store.state().len(), 1, "the cache holds the new pod only");
    }
}
