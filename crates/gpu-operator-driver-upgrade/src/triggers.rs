//! The upgrade reconciler's own caches as trigger streams: each watch fills its cache and yields
//! every object it touched (applied or deleted), so a pass wakes on every change the cache saw;
//! or, with a test ([`touched_if`]), only new and deleted objects and the updates the test tells
//! from the version the cache held (no fingerprint per object kept beside the cache).
//!
//! Not kube's shared reflector subscription (`Writer::subscribe`): its handle looks each changed
//! object up in the cache, and when the object was deleted before the handle read its event (a
//! driver pod replaced during an upgrade) it answers `Pending` without asking to be woken again,
//! so the stream never yields again and the upgrade stalls (seen at 1,000 nodes: 215 nodes done,
//! the rest waiting for a pass that never came).

use std::sync::Arc;

use futures::{Stream, StreamExt as _};
use gpu_operator_core::cache::change_stream::{self, Changed};
use kube::runtime::{
    reflector::{ObjectRef, store::Writer},
    watcher,
};

/// Fills `writer`'s cache from `events` and yields each object an event applied or deleted;
/// watch errors are retried by the watcher's backoff and yield nothing.
pub fn touched<K>(
    events: impl Stream<Item = watcher::Result<watcher::Event<K>>> + Send,
    writer: Writer<K>,
) -> impl Stream<Item = Arc<K>> + Send
where
    K: kube::Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Default + Send + Sync,
{
    touched_if(events, writer, |_, _| true)
}

/// Like [`touched`], but yields an update only when `changed(cached, new)` holds.
pub fn touched_if<K>(
    events: impl Stream<Item = watcher::Result<watcher::Event<K>>> + Send,
    mut writer: Writer<K>,
    changed: Changed<K>,
) -> impl Stream<Item = Arc<K>> + Send
where
    K: kube::Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Default + Send + Sync,
{
    events.filter_map(move |event| {
        let touched = event.ok().and_then(|event| {
            // A (re)list's objects reach the cache only at its end: each is told from the
            // version the cache still holds.
            let listed = match &event {
                watcher::Event::InitApply(object) => Some((
                    object.clone(),
                    writer.as_reader().get(&ObjectRef::from_obj(object)),
                )),
                _ => None,
            };
            let old = change_stream::apply(&mut writer, &event);
            let (object, old) = match event {
                watcher::Event::Apply(object) => (object, old),
                watcher::Event::Delete(object) => (object, None),
                watcher::Event::InitApply(_) => listed?,
                watcher::Event::Init | watcher::Event::InitDone => return None,
            };
            old.is_none_or(|old| changed(&old, &object))
                .then(|| Arc::new(object))
        });
        std::future::ready(touched)
    })
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

    #[tokio::test]
    async fn with_a_test_only_new_deleted_and_changed_objects_wake_a_pass() {
        let labelled = |name: &str, version: &str, app: &str| {
            let mut pod = pod(name);
            pod.metadata.resource_version = Some(version.to_owned());
            pod.metadata.labels = Some([("app".to_owned(), app.to_owned())].into());
            pod
        };
        let (_store, writer) = reflector::store::<Pod>();
        let events = stream::iter(vec![
            Ok(watcher::Event::Init),
            Ok(watcher::Event::InitApply(labelled("a", "1", "x"))),
            Ok(watcher::Event::InitDone),
            Ok(watcher::Event::Apply(labelled("a", "2", "x"))), // a heartbeat: same labels
            Ok(watcher::Event::Apply(labelled("a", "3", "y"))),
            // A relist: `a` as cached, `b` new.
            Ok(watcher::Event::Init),
            Ok(watcher::Event::InitApply(labelled("a", "4", "y"))),
            Ok(watcher::Event::InitApply(labelled("b", "5", "x"))),
            Ok(watcher::Event::InitDone),
            Ok(watcher::Event::Delete(labelled("a", "4", "y"))),
        ]);
        let woken: Vec<(String, String)> = touched_if(events, writer, |old: &Pod, new: &Pod| {
            old.metadata.labels != new.metadata.labels
        })
        .boxed()
        .map(|p| {
            (
                p.metadata.name.clone().unwrap_or_default(),
                p.metadata.resource_version.clone().unwrap_or_default(),
            )
        })
        .collect()
        .await;
        let row = |name: &str, version: &str| (name.to_owned(), version.to_owned());
        assert_eq!(
            woken,
            [row("a", "1"), row("a", "3"), row("b", "5"), row("a", "4")],
            "listed (new), relabelled, new at the relist, deleted; not the heartbeat nor the \
             relisted copy of what the cache held"
        );
    }
}
